package hooks

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// finish is the exit path (engine.Finish): drain (if the init's exit was
// not seen yet), gate on the upperdir into staging, counters, table
// removal, manifest, then the records marked cleaned and the marker
// removed. poststop says it runs at poststop (false: Grace passed without
// one). Idempotent; the second call returns nil, nil.
func (op *operation) finish(ctx context.Context, poststop bool) (*spec.Manifest, error) {
	op.mu.Lock()
	if op.finished {
		op.mu.Unlock()
		return nil, nil
	}
	op.finished = true
	op.mu.Unlock()
	end := ""
	if !poststop {
		end = "poststop never came: the monitor finished the operation on its own after the container's init was gone"
	}
	p := &engine.Finish{
		Gate:     op.gate(),
		Drain:    hookDrain{op},
		Network:  op.net,
		Store:    engine.RecordStore{Store: op.store, ID: op.req.OperationID, Log: op.log},
		Release:  hookRelease{op},
		Manifest: func(x engine.Facts) *spec.Manifest { return op.manifest(x, end) },
		// One operation per monitor process: the gate runs here, and a
		// failure costs this operation's manifest only.
		GateLimit: op.req.gateTimeout(),
		Log:       op.log,
	}
	m, err := p.Run(ctx, engine.Facts{Started: op.ready, Exit: engine.Exit{Deadline: op.deadline.Stop()}})
	op.log.WithField("verdict", m.Gate.Verdict).WithField("poststop", poststop).Info("hook operation finished")
	return m, err
}

// hookDrain is the exit path's drain: the one the init's exit ran, or
// runs now.
type hookDrain struct{ op *operation }

func (d hookDrain) Drain(ctx context.Context) drain.Result { return d.op.drain(ctx) }

// gate is the operation's gate, run in this process: on the upperdir,
// or, without one, the answer engine.NoDiff gives.
func (op *operation) gate() engine.InProcess {
	return engine.InProcess{Input: op.gateInput, Skip: func() (engine.GateOutcome, bool) {
		if pr := op.adm.Diff.Problem; pr != "" {
			return engine.NoDiff(pr, op.adm.Contract), true
		}
		return engine.GateOutcome{}, false
	}}
}

// gateInput is the gate's input: the container's upperdir, read from
// when the table was installed, less what bind's baseline found there.
func (op *operation) gateInput(started time.Time) (gate.Input, error) {
	src, c := op.adm.Diff, op.adm.Contract
	dir, err := op.store.OperationDir(op.req.OperationID)
	if err != nil {
		return gate.Input{}, err
	}
	base, err := op.baseline()
	if err != nil {
		return gate.Input{}, err
	}
	return gate.Input{
		UpperDir: src.Upper, LowerDirs: src.Lowers, UserXattr: src.UserXattr,
		Workspace: c.WorkspaceOrDefault(), Products: c.Products,
		StagingDir: filepath.Join(dir, record.StagedDir), StartTime: started,
		ExcludeMounts: op.adm.Mounts, FailUnclaimed: c.FailUnclaimed(), Baseline: base,
	}, nil
}

// hookRelease ends the operation once its manifest is durable: with the
// table gone, the records are marked cleaned and the marker removed; a
// table still installed keeps the marker, and the next hook retries it.
type hookRelease struct{ op *operation }

func (r hookRelease) Release(m *spec.Manifest, _ *uint32) error {
	op := r.op
	defer closeFD(op.pidfd)
	if m.Enforcement.Network.TableRemoved == "" {
		return fmt.Errorf("the network table %s could not be removed; the next hook retries", op.adm.Table)
	}
	if record.ValidOperationID(op.req.OperationID) {
		_ = op.store.MarkCleaned(op.req.OperationID, "") // losing it only keeps the record longer
		removeMarker(op.store.Dir, op.req.OperationID)
	}
	return nil
}
