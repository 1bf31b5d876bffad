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
		if r.op.exitPath {
			r.op.unmountReleased()
		}
		close(r.op.done)
	})
	return nil
}

// unmountReleased starts unmounting the task's rootfs as its exit path
// releases it, beside the Wait, TaskExit and Delete that follow, when the
// shim mounted it and no hook of the spec runs on it in runc's delete
// (poststop): the exit path has drained the task and gated its product,
// so nothing reads the rootfs any more. The overlay's unmount syncs the
// upper filesystem (about 1 ms on the 2-vCPU VMs); done in the time the
// caller takes to send Delete, it is off Delete's path. Delete waits for
// it, and unmounts again if it failed. Called before done is closed:
// Delete reads unmounting only after done.
func (op *operation) unmountReleased() {
	if !op.ownRootfs || op.specHooks {
		return
	}
	c := make(chan struct{})
	op.unmounting = c
	go func() {
		defer close(c)
		op.unmountedOK = unmountRootfs(op.ctx, op.bundle, op.containerID)
	}()
}

// release lets Wait, Delete and the held TaskExit go with the init's own
// status, whatever happened in the exit path (idempotent).
func (op *operation) release(override *uint32) {
	op.exit.Release.Release(nil, override)
}
