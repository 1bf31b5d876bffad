package service

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/effect"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
)

// diffSource is where the gate reads what the task changed: the overlay
// upperdir over its image layers, or the directory of a bind-mounted
// single-layer snapshot. Problem is set when neither is available.
type diffSource struct {
	Upper     string   `json:"upperdir,omitempty"`
	Lowers    []string `json:"lowerdirs,omitempty"`
	UserXattr bool     `json:"userxattr,omitempty"`
	Root      string   `json:"root,omitempty"`
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
		return diffSource{Root: m.Source}
	}
	return diffSource{Problem: fmt.Sprintf("rootfs mount type %q is not overlay or bind", m.Type)}
}

func mountDestinations(s *specs.Spec) []string {
	var out []string
	for _, m := range s.Mounts {
		out = append(out, m.Destination)
	}
	return out
}

// gateOutcome is the gate's result or why it could not give one.
type gateOutcome struct {
	res *gate.Result
	err error
}

// runProductGate drains the cgroup, then gates the diff into staging.
func (op *operation) runProductGate(ctx context.Context, started time.Time) gateOutcome {
	h := op.gateHelper
	op.gateHelper = nil
	defer func() {
		if h != nil { // not handed to runGate: let it exit
			h.abandon()
		}
	}()
	src := op.diff
	if src.Problem != "" {
		if len(op.contract.Products) == 0 {
			return gateOutcome{}
		}
		return gateOutcome{err: fmt.Errorf("no diff to gate: %s", src.Problem)}
	}
	dir, err := op.store.OperationDir(op.id)
	if err != nil {
		return gateOutcome{err: err}
	}
	in := gate.Input{
		UpperDir: src.Upper, LowerDirs: src.Lowers, UserXattr: src.UserXattr, RootDir: src.Root,
		Workspace: op.contract.WorkspaceOrDefault(), Products: op.contract.Products,
		StagingDir: filepath.Join(dir, record.StagedDir), StartTime: started,
		ExcludeMounts: op.mounts,
	}
	used := h
	h = nil
	res, err := runGate(used, in, op.cfg.GateTimeout.Duration)
	return gateOutcome{res: res, err: err}
}

// noteGate emits gate_rejected events for the gate's violations.
func (op *operation) noteGate(g gateOutcome) {
	if op.mon == nil {
		return
	}
	for _, ev := range effect.GateEvents(g.res, g.err) {
		op.mon.Note(ev)
	}
}
