package service

import (
	"context"
	"sync"

	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/spec"
)

// exitPipelineFor wires op's exit path (engine.Finish) to the shim's
// steps: the gate in a helper process (helperGate), the drain of the bound
// cgroup and every escaped process, the operation's boundary, its records,
// and the release of Wait, Delete and the held TaskExit.
func exitPipelineFor(op *operation) *engine.Finish {
	return &engine.Finish{
		Gate:             &helperGate{op: op},
		Drain:            cgroupDrain{op: op},
		Network:          op.net,
		Store:            engine.RecordStore{Store: op.store, ID: op.id, Log: op.logger(op.ctx)},
		Release:          &opRelease{op: op},
		Manifest:         op.manifest,
		GateLimit:        op.cfg.GateTimeout.Duration,
		GateFailedStatus: op.cfg.GateFailedExitStatus,
		Log:              op.logger(op.ctx),
	}
}

// cgroupDrain drains the bound cgroup and every escaped process the
// binding sensor listed (drain.All).
type cgroupDrain struct{ op *operation }

func (d cgroupDrain) Drain(ctx context.Context) drain.Result {
	sub := d.op.admission.Subject
	if sub == nil {
		return drain.Result{}
	}
	return drain.All(ctx, sub.CgroupPath, d.op.net.DrainSteps())
}

// opRelease closes the operation's done once, after setting the status
// override Wait, Delete and the held TaskExit report.
type opRelease struct {
	op   *operation
	once sync.Once
}

func (r *opRelease) Release(_ *spec.Manifest, override *uint32) error {
	r.once.Do(func() {
		r.op.override = override
		if h := r.op.held; h != nil {
			h.override = override
		}
		close(r.op.done)
	})
	return nil
}

// release lets Wait, Delete and the held TaskExit go with the init's own
// status, whatever happened in the exit path (idempotent).
func (op *operation) release(override *uint32) {
	op.exit.Release.Release(nil, override)
}
