package service

import (
	"fmt"
	"path/filepath"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/moby/sys/mountinfo"

	"github.com/gensee/gensee/shim/gate"
)

// diffSource is where the gate reads what the task changed: the overlay
// upperdir over its image layers (given in the rootfs mount, or found in the
// mount table for a bind of a mounted overlay), or the directory of a
// bind-mounted single-layer snapshot. Problem is set when neither is
// available.
type diffSource = gate.DiffSource

// diffSourceOf reads the task's rootfs mounts (after hardenRootfs).
func diffSourceOf(r *taskAPI.CreateTaskRequest) diffSource {
	if len(r.Rootfs) != 1 {
		return diffSource{Problem: fmt.Sprintf("rootfs has %d mounts; the gate reads exactly one overlay or bind mount", len(r.Rootfs))}
	}
	m := r.Rootfs[0]
	switch m.Type {
	case "overlay":
		d, err := gate.ParseOverlayOptions(m.Options)
		if err != nil {
			return diffSource{Problem: err.Error()}
		}
		if d.Upper == "" {
			return diffSource{Problem: "overlay rootfs has no upperdir (read-only)"}
		}
		return diffSource{Upper: d.Upper, Lowers: d.Lowers, UserXattr: d.UserXattr}
	case "bind":
		ms, err := mountinfo.GetMounts(nil)
		if err != nil {
			return diffSource{Problem: fmt.Sprintf("read the mount table to place bind rootfs %s: %v", m.Source, err)}
		}
		return bindDiffSource(m.Source, ms)
	}
	return diffSource{Problem: fmt.Sprintf("rootfs mount type %q is not overlay or bind", m.Type)}
}

// bindDiffSource places a bind-mounted rootfs. A client that mounts the
// snapshot itself and hands the task one bind of the merged directory
// (BuildKit's containerd worker: an overlay at
// <root>/containerd-overlayfs/cachemounts/buildkitNNN) gives the gate a tree
// that mixes the image with the task's writes; the overlay's own upperdir
// and lowerdirs, from the mount table, are the task's diff and its image.
// So: when the source is the root of an overlay mount (the topmost one
// there), gate that overlay, read as every door reads one
// (gate.ReadOverlay), and claim no diff when it cannot be read so;
// anything else is gated as the plain directory it is (bind layout: a
// single-layer snapshot, deletions invisible).
func bindDiffSource(source string, table []*mountinfo.Info) diffSource {
	src, err := filepath.EvalSymlinks(source)
	if err != nil {
		return diffSource{Problem: fmt.Sprintf("bind rootfs %s: %v", source, err)}
	}
	at := gate.MountAt(src, table)
	if !gate.OverlayRoot(at) {
		// A plain directory, or one inside an overlay (a subdirectory, a
		// bind of one): that overlay's upperdir holds more than this tree,
		// so the directory is gated as a single-layer snapshot.
		return diffSource{Root: source}
	}
	d, err := gate.ReadOverlay(at)
	if err != nil {
		return diffSource{Problem: fmt.Sprintf("bind rootfs %s: %v", src, err)}
	}
	return diffSource{Upper: d.Upper, Lowers: d.Lowers, UserXattr: d.UserXattr, BindOf: src}
}
