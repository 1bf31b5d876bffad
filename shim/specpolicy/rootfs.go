package specpolicy

import (
	"path"
	"slices"
	"strings"
)

// The task's rootfs mounts (CreateTaskRequest.Rootfs) come from the
// containerd client (WithRootFS), not from containerd, and the shim mounts
// them as root on the host before runc runs: {bind "/" rbind,rw} would hand
// the workload the host. CheckRootfs admits exactly what containerd's
// overlayfs and native snapshotters hand a task (v2.4.2
// plugins/snapshots/overlay/overlay.go mounts(), native/native.go mounts()),
// under the operator's containerd_root, plus BuildKit's containerd worker's
// bind of an overlay it mounted itself from that snapshotter's snapshots.
// A host directory as the container's root is root.path's business
// (CheckRootPath: read-only, no runtime or kernel tree), never a rootfs
// mount's.

// Snapshotter directories under containerd's root; each keeps its
// snapshots in <root>/<snapshotter>/snapshots/<id>, id a decimal counter.
const (
	OverlaySnapshotter = "io.containerd.snapshotter.v1.overlayfs"
	NativeSnapshotter  = "io.containerd.snapshotter.v1.native"
)

// RootfsMount is one rootfs mount of a task Create, as the client sent it.
type RootfsMount struct {
	Type, Source, Target string
	Options              []string
}

// MountedFS is what the host's mount table says about a path.
type MountedFS struct {
	// Root: the path is the root directory of the mount it resolves to
	// (its mount point, and the mount shows its file system's root).
	Root bool
	// Type and SuperOptions are that mount's (mountinfo fields 9 and 11,
	// the super options still octal-escaped).
	Type, SuperOptions string
	// Beneath counts the mounts strictly beneath the path: what an rbind
	// of it carries along.
	Beneath int
}

// RootfsHost is what CheckRootfs asks of the host.
type RootfsHost interface {
	// Dir returns nil when p is a directory reached without following a
	// symlink in any component (openat2 RESOLVE_NO_SYMLINKS).
	Dir(p string) error
	// Mounted describes the mount p resolves to (p reached as Dir
	// reaches it).
	Mounted(p string) (MountedFS, error)
}

// Options containerd's snapshotters put on a rootfs mount, plus
// metacopy=off and redirect_dir=nofollow, which the shim forces on every
// overlay before the check (gate.HardenOverlayOptions). uidmap=/gidmap=
// (user-namespaced pods) make containerd idmap the same directories.
// Anything else (index=on, volatile, xino, loop, remount, propagation,
// X-containerd.*) is not understood here and refused.
var (
	overlayFlags = []string{"index=off", "userxattr", "metacopy=off", "redirect_dir=nofollow", "ro", "rw"}
	bindFlags    = []string{"rbind", "bind", "ro", "rw"}
)

// CheckRootfs admits a task's rootfs mounts for a containerd whose root is
// containerdRoot (the operator's containerd_root). No mount (root.path
// alone) is admitted here; CheckRootPath judges that root.
func CheckRootfs(mounts []RootfsMount, containerdRoot string, host RootfsHost) error {
	if len(mounts) == 0 {
		return nil
	}
	if len(mounts) > 1 {
		return refuse(RuleRootfsMount, "rootfs",
			"the task has %d rootfs mounts; containerd's overlayfs and native snapshotters hand a task exactly one: create the task from the container's snapshot (WithNewSnapshot, no WithRootFS), or give a host directory as a read-only root.path", len(mounts))
	}
	m := mounts[0]
	field := "rootfs[0]"
	if m.Target != "" {
		return refuse(RuleRootfsMount, field+".target",
			"the rootfs mount has target %q; containerd's snapshotters mount the snapshot at the root itself: drop the target", m.Target)
	}
	overlayRoot := path.Join(containerdRoot, OverlaySnapshotter)
	nativeRoot := path.Join(containerdRoot, NativeSnapshotter)
	switch m.Type {
	case "overlay":
		if m.Source != "overlay" {
			return refuse(RuleRootfsMount, field+".source",
				"the overlay rootfs has source %q; containerd's overlayfs snapshotter names it \"overlay\": create the task from the container's snapshot (no WithRootFS)", m.Source)
		}
		return checkOverlayOptions(m.Options, field, overlayRoot, host)
	case "bind":
		return checkRootfsBind(m, field, overlayRoot, nativeRoot, host)
	}
	return refuse(RuleRootfsMount, field+".type",
		"the rootfs mount is of type %q; only containerd's overlayfs (overlay, or a bind of a one-layer snapshot) and native (bind) snapshots are mounted as a task's root: create the task from an image with one of those snapshotters, or give a host directory as a read-only root.path", m.Type)
}

// checkOverlayOptions admits an overlay's options: each lowerdir, the
// upperdir and the workdir a snapshot's directory of the overlayfs
// snapshotter under root, every other option understood.
func checkOverlayOptions(opts []string, field, root string, host RootfsHost) error {
	lowers := 0
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		var dirs []string
		suffix := "fs"
		switch {
		case k == "lowerdir":
			// The kernel splits it on ':' ('\:' escapes one); containerd
			// joins snapshot paths, which have neither.
			if strings.Contains(v, `\`) {
				return refuse(RuleRootfsMount, field+".options",
					"the overlay's lowerdir %q has an escape; containerd's snapshot paths have none: create the task from the container's snapshot (no WithRootFS)", v)
			}
			dirs = strings.Split(v, ":")
			lowers += len(dirs)
		case k == "upperdir":
			dirs = []string{v}
		case k == "workdir":
			dirs, suffix = []string{v}, "work"
		case k == "uidmap" || k == "gidmap":
			if !idMap(v) {
				return optionRefusal(field, o)
			}
			continue
		case slices.Contains(overlayFlags, o):
			continue
		default:
			return optionRefusal(field, o)
		}
		for _, d := range dirs {
			if err := checkSnapshotDir(d, k, field, root, suffix, host); err != nil {
				return err
			}
		}
	}
	if lowers == 0 {
		return refuse(RuleRootfsMount, field+".options",
			"the overlay rootfs has no lowerdir; containerd's overlayfs snapshotter gives every overlay its image layers: create the task from the container's snapshot (no WithRootFS)")
	}
	return nil
}

// checkRootfsBind admits a bind of a snapshot's directory (overlayfs:
// <root>/snapshots/<id>/fs, a one-layer snapshot; native:
// <root>/snapshots/<id>), or of the root of a mounted overlay whose layers
// are all overlayfs snapshots (BuildKit's containerd worker mounts the
// step's overlay itself and hands the task a bind of it).
func checkRootfsBind(m RootfsMount, field, overlayRoot, nativeRoot string, host RootfsHost) error {
	bind := false
	for _, o := range m.Options {
		k, v, _ := strings.Cut(o, "=")
		switch {
		case o == "bind" || o == "rbind":
			bind = true
		case (k == "uidmap" || k == "gidmap") && idMap(v):
		case slices.Contains(bindFlags, o):
		default:
			return optionRefusal(field, o)
		}
	}
	if !bind {
		return refuse(RuleRootfsMount, field+".options",
			"the bind rootfs has neither bind nor rbind among its options; containerd's snapshotters give rbind: create the task from the container's snapshot (no WithRootFS)")
	}
	src := m.Source
	if !path.IsAbs(src) || path.Clean(src) != src {
		return refuse(RuleRootfsMount, field+".source",
			"the bind rootfs's source %q is not an absolute, clean path (no \"..\", no \".\", no trailing or double slash); containerd's snapshot paths are: create the task from the container's snapshot (no WithRootFS)", src)
	}
	if err := host.Dir(src); err != nil {
		return refuse(RuleRootfsMount, field+".source",
			"the bind rootfs's source %s cannot be reached without following a symlink, or is not a directory (%v); containerd's snapshot paths have no symlinks: if containerd's root is reached through one, configure containerd's root and containerd_root as the real path", src, err)
	}
	mfs, err := host.Mounted(src)
	if err != nil {
		return refuse(RuleRootfsMount, field+".source",
			"the bind rootfs's source %s cannot be placed in the mount table (%v); create the task from the container's snapshot (no WithRootFS)", src, err)
	}
	snapshot := snapshotPath(src, overlayRoot, "fs") || snapshotPath(src, nativeRoot, "")
	if !snapshot && (!mfs.Root || mfs.Type != "overlay") {
		return refuse(RuleRootfsMount, field+".source",
			"the rootfs binds host path %s, which is not a snapshot of containerd's overlayfs or native snapshotter under containerd_root %s (nor the root of an overlay of overlayfs snapshots): the workload would get host files outside any snapshot; create the task from the container's snapshot (no WithRootFS), or give a host directory as a read-only root.path (ctr run --rootfs --read-only)",
			src, path.Dir(overlayRoot))
	}
	if mfs.Beneath > 0 {
		return refuse(RuleRootfsMount, field+".source",
			"the bind rootfs's source %s has %d mount(s) beneath it, which the bind would carry into the container unchecked; bind a snapshot with nothing mounted beneath it", src, mfs.Beneath)
	}
	if snapshot {
		return nil
	}
	// BuildKit's case: the overlay's layers, as the mount table shows
	// them, must be the overlayfs snapshotter's snapshots.
	return checkMountedOverlay(src, mfs.SuperOptions, field, overlayRoot, host)
}

// checkMountedOverlay admits the overlay mounted at src from its super
// options (mountinfo's, octal-escaped): every lowerdir, the upperdir and
// the workdir an overlayfs snapshot's directory. Other super options (the
// kernel shows its defaults: xino, uuid, ...) are not the client's: the
// mount already exists and is only bound.
func checkMountedOverlay(src, super, field, root string, host RootfsHost) error {
	lowers := 0
	for _, raw := range strings.Split(super, ",") {
		k, v, _ := strings.Cut(raw, "=")
		var dirs []string
		suffix := "fs"
		switch k {
		case "lowerdir":
			dirs = strings.Split(v, ":")
			lowers += len(dirs)
		case "lowerdir+":
			dirs = []string{v}
			lowers++
		case "datadir+":
			dirs = []string{v}
		case "upperdir":
			dirs = []string{v}
		case "workdir":
			dirs, suffix = []string{v}, "work"
		default:
			continue
		}
		for _, d := range dirs {
			if strings.Contains(d, `\`) {
				return refuse(RuleRootfsMount, field+".source",
					"the rootfs binds the overlay at %s, whose %s %q the mount table shows escaped; containerd's snapshot paths need no escape: bind an overlay of containerd's overlayfs snapshots", src, k, d)
			}
			if err := checkSnapshotDir(d, k, field+".source (the overlay at "+src+")", root, suffix, host); err != nil {
				return err
			}
		}
	}
	if lowers == 0 {
		return refuse(RuleRootfsMount, field+".source",
			"the rootfs binds the overlay at %s, whose lowerdirs the mount table does not show; bind an overlay of containerd's overlayfs snapshots", src)
	}
	return nil
}

// checkSnapshotDir admits one overlay directory d (option k): the
// overlayfs snapshotter's <root>/snapshots/<id>/<suffix>, reached without
// a symlink.
func checkSnapshotDir(d, k, field, root, suffix string, host RootfsHost) error {
	if !snapshotPath(d, root, suffix) {
		return refuse(RuleRootfsMount, field,
			"the overlay's %s %q is not a snapshot directory of containerd's overlayfs snapshotter (%s/snapshots/<id>/%s, under containerd_root %s): the workload would get host files outside any snapshot; create the task from the container's snapshot (no WithRootFS), or have the operator set containerd_root to containerd's root",
			k, d, root, suffix, path.Dir(root))
	}
	if err := host.Dir(d); err != nil {
		return refuse(RuleRootfsMount, field,
			"the overlay's %s %s cannot be reached without following a symlink, or is not a directory (%v); if containerd's root is reached through one, configure containerd's root and containerd_root as the real path", k, d, err)
	}
	return nil
}

// snapshotPath reports whether p is <root>/snapshots/<id>[/<suffix>]
// exactly, id a decimal number (containerd's snapshot ids), p clean.
func snapshotPath(p, root, suffix string) bool {
	if path.Clean(p) != p || !path.IsAbs(root) || path.Clean(root) != root || root == "/" {
		return false
	}
	rest, ok := strings.CutPrefix(p, root+"/snapshots/")
	if !ok {
		return false
	}
	id := rest
	if suffix != "" {
		if id, ok = strings.CutSuffix(rest, "/"+suffix); !ok {
			return false
		}
	}
	return digits(id)
}

func digits(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// idMap reports whether v reads as containerd's uidmap/gidmap value:
// container:host:size triples, comma-separated.
func idMap(v string) bool {
	for _, t := range strings.Split(v, ",") {
		f := strings.Split(t, ":")
		if len(f) != 3 || !digits(f[0]) || !digits(f[1]) || !digits(f[2]) {
			return false
		}
	}
	return true
}

func optionRefusal(field, o string) error {
	return refuse(RuleRootfsMount, field+".options",
		"the rootfs mount has option %q, which is not one containerd's overlayfs or native snapshotter sets by default: drop it (from the snapshotter's mount_options too), or create the task from the container's snapshot (no WithRootFS)", o)
}
