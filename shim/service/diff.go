package service

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/moby/sys/mountinfo"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
)

// diffSource is where the gate reads what the task changed: the overlay
// upperdir over its image layers (given in the rootfs mount, or found in the
// mount table for a bind of a mounted overlay), or the directory of a
// bind-mounted single-layer snapshot. Problem is set when neither is
// available.
type diffSource struct {
	Upper     string   `json:"upperdir,omitempty"`
	Lowers    []string `json:"lowerdirs,omitempty"`
	UserXattr bool     `json:"userxattr,omitempty"`
	Root      string   `json:"root,omitempty"`
	BindOf    string   `json:"bind_of,omitempty"` // Upper/Lowers read from the mount table for this bind source
	Problem   string   `json:"problem,omitempty"`
}

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
// there), gate that overlay, and claim no diff when its options cannot be
// read or it has no upperdir; anything else is gated as the plain
// directory it is (bind layout: a single-layer snapshot, deletions
// invisible), as before.
func bindDiffSource(source string, table []*mountinfo.Info) diffSource {
	src, err := filepath.EvalSymlinks(source)
	if err != nil {
		return diffSource{Problem: fmt.Sprintf("bind rootfs %s: %v", source, err)}
	}
	var at *mountinfo.Info // the mount src is on: the longest mount point above it, topmost
	for _, mi := range table {
		if mi.Mountpoint == src || mi.Mountpoint == "/" || strings.HasPrefix(src, mi.Mountpoint+"/") {
			if at == nil || len(mi.Mountpoint) >= len(at.Mountpoint) {
				at = mi
			}
		}
	}
	if at == nil || at.FSType != "overlay" || at.Mountpoint != src || at.Root != "/" {
		// A plain directory, or one inside an overlay (a subdirectory, a
		// bind of one): that overlay's upperdir holds more than this tree,
		// so the directory is gated as a single-layer snapshot.
		return diffSource{Root: source}
	}
	d, err := gate.ParseMountinfoOverlay(at.VFSOptions)
	if err != nil {
		return diffSource{Problem: fmt.Sprintf("bind rootfs %s is an overlay: %v", src, err)}
	}
	if d.Upper == "" {
		return diffSource{Problem: fmt.Sprintf("bind rootfs %s is a read-only overlay (no upperdir)", src)}
	}
	if len(d.Lowers) == 0 {
		return diffSource{Problem: fmt.Sprintf("bind rootfs %s is an overlay without lowerdirs", src)}
	}
	return diffSource{Upper: d.Upper, Lowers: d.Lowers, UserXattr: d.UserXattr, BindOf: src}
}

// gateOutcome is the gate's result or why it could not give one.
type gateOutcome struct {
	res *gate.Result
	err error
}

// helperGate runs the product gate in a helper process (gaterun.go): the
// operation's warm helper (warmGate), or one prepare starts beside the
// drain, handed its input by run once nothing writes to the diff any more.
type helperGate struct {
	op      *operation
	spawned chan preparedGate // prepare's helper and input; run takes them
}

// preparedGate is what prepare readies beside the drain: the helper (nil
// if none could be started) and its input, encoded (nil if it could not
// be: run then says why).
type preparedGate struct {
	h     *gateHelper
	input []byte
}

func (g *helperGate) prepare(ctx context.Context, started time.Time) {
	if g.op.diff.Problem != "" { // no diff to hand it
		return
	}
	// The warm helper if it is still there (warmGate); else one started
	// now, whose exec and start-up run beside the drain. The input is
	// encoded there too: it names only what the operation fixed at Create
	// and the start time.
	g.spawned = make(chan preparedGate, 1)
	go func() {
		var p preparedGate
		if p.h = g.op.warm.take(); p.h == nil {
			var err error
			if p.h, err = spawnGateHelper(false); err != nil {
				g.op.logger(ctx).WithError(err).Warn("start gate helper beside the drain; the gate starts one after it")
			}
		}
		if in, err := g.input(started); err == nil {
			p.input, _ = json.Marshal(in)
		}
		g.spawned <- p
	}()
}

// input is the gate's input for a task that started at started.
func (g *helperGate) input(started time.Time) (gate.Input, error) {
	op, src := g.op, g.op.diff
	dir, err := op.store.OperationDir(op.id)
	if err != nil {
		return gate.Input{}, err
	}
	return gate.Input{
		UpperDir: src.Upper, LowerDirs: src.Lowers, UserXattr: src.UserXattr, RootDir: src.Root,
		Workspace: op.contract.WorkspaceOrDefault(), Products: op.contract.Products,
		StagingDir: filepath.Join(dir, record.StagedDir), StartTime: started,
		ExcludeMounts: op.mounts, FailUnclaimed: op.contract.FailUnclaimed(),
	}, nil
}

func (g *helperGate) run(ctx context.Context, started time.Time) gateOutcome {
	op := g.op
	var p preparedGate
	if g.spawned != nil {
		p = <-g.spawned
		g.spawned = nil
	}
	defer func() {
		if p.h != nil { // not handed to runGate: let it exit
			p.h.abandon()
		}
	}()
	src := op.diff
	if src.Problem != "" {
		if len(op.contract.Products) == 0 && !op.contract.FailUnclaimed() {
			return gateOutcome{}
		}
		return gateOutcome{err: fmt.Errorf("no diff to gate: %s", src.Problem)}
	}
	input := p.input
	if input == nil {
		in, err := g.input(started)
		if err != nil {
			return gateOutcome{err: err}
		}
		if input, err = json.Marshal(in); err != nil {
			return gateOutcome{err: fmt.Errorf("encode gate input: %w", err)}
		}
	}
	used := p.h
	p.h = nil
	res, err := runGate(used, input, op.cfg.GateTimeout.Duration)
	return gateOutcome{res: res, err: err}
}
