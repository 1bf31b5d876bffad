package service

import (
	"context"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/retention"
	"github.com/gensee/gensee/spec"
)

// Start arms the exit path before the inner Start (an instant exit cannot
// slip past it), then starts the contract deadline.
func (s *service) Start(ctx context.Context, r *taskAPI.StartRequest) (*taskAPI.StartResponse, error) {
	op := s.get(r.ID)
	if r.ExecID != "" || op == nil {
		return s.TTRPCTaskService.Start(ctx, r)
	}
	if !op.transition(opStarted) {
		return nil, errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: task %s is %s, not created", r.ID, op.current())
	}
	op.held = s.pub.arm(r.ID, op.done)
	op.mu.Lock()
	op.startedAt = s.now()
	op.mu.Unlock()
	resp, err := s.TTRPCTaskService.Start(ctx, r)
	if err != nil {
		// The init never ran: nothing to finalize, nothing to hold.
		s.pub.disarm(r.ID)
		op.mu.Lock()
		op.state = opCreated
		op.mu.Unlock()
		return nil, err
	}
	if op.mon != nil {
		sub := op.admission.Subject
		op.mon.Start(int(op.netns.Fd()), op.plan, cgroup.Proc{PID: sub.InitPID, Start: sub.StartTime})
	}
	s.startDeadline(op)
	go s.watchExit(op)
	return resp, nil
}

// startDeadline kills the task when the contract's deadline passes.
func (s *service) startDeadline(op *operation) {
	d, err := op.contract.DeadlineDuration()
	if err != nil || d <= 0 {
		return // no deadline (a malformed one never passes catalog validation)
	}
	op.mu.Lock()
	op.deadline = time.AfterFunc(d, func() {
		op.mu.Lock()
		op.deadlineHit = true
		op.mu.Unlock()
		ctx := s.ctx
		op.logger(ctx).WithField("deadline", op.contract.Deadline).Warn("contract deadline exceeded; killing the task")
		if op.mon != nil {
			op.mon.Note(spec.Event{Kind: spec.EventDeadlineExceeded, Control: "deadline", Rule: op.contract.Deadline,
				Detail: "the contract deadline " + op.contract.Deadline + " passed; the task was killed"})
		}
		if _, err := s.TTRPCTaskService.Kill(ctx, &taskAPI.KillRequest{ID: op.containerID, Signal: uint32(unix.SIGKILL), All: true}); err != nil {
			op.logger(ctx).WithError(err).Error("kill at deadline")
		}
	})
	op.mu.Unlock()
}

// watchExit waits for the init to exit (execs drained by the inner
// service), then runs the exit path — drain (the cgroup and every escaped
// process, see drain.All), gate, counters, table removal, manifest — and releases Wait, Delete and the held TaskExit by closing done.
// The rootfs stays mounted and the cgroup present until the inner Delete,
// which waits for done.
func (s *service) watchExit(op *operation) {
	ctx := s.ctx
	defer close(op.done)
	resp, err := s.TTRPCTaskService.Wait(ctx, &taskAPI.WaitRequest{ID: op.containerID})
	op.mu.Lock()
	if op.deadline != nil {
		op.deadline.Stop()
	}
	x := exitFacts{started: op.startedAt, deadline: op.deadlineHit}
	op.mu.Unlock()
	if err != nil {
		op.logger(ctx).WithError(err).Error("wait for init exit")
	} else {
		st := resp.ExitStatus
		x.status = &st
	}
	op.transition(opExited)
	t0 := time.Now()
	if op.diff.Problem == "" { // otherwise the exit path has no diff to hand it
		// Started now, not at Start: it holds no memory while the task
		// runs, and its start-up overlaps the drain.
		h, err := spawnGateHelper()
		if err != nil {
			op.logger(ctx).WithError(err).Warn("start gate helper ahead of the drain; the gate starts one after it")
		}
		op.gateHelper = h // read only by this goroutine
	}
	if sub := op.admission.Subject; sub != nil {
		k := drain.All(ctx, sub.CgroupPath, drain.StepsFor(op.mon))
		x.drained, x.drainErr, x.escapes = k.Drained, k.Err, k.Escapes
		if len(x.escapes) > 0 {
			op.logger(ctx).WithField("escapes", len(x.escapes)).Warn("processes of the container were outside the bound cgroup; the exit drain killed those still alive")
		}
		if x.drainErr != nil {
			op.logger(ctx).WithError(x.drainErr).Error("drain cgroup")
		}
	}
	t1 := time.Now()
	x.gate, x.gateRan = op.runProductGate(ctx, x.started), true
	t2 := time.Now()
	op.noteGate(x.gate)
	op.finalizeNetwork(ctx, &x)
	m := op.manifest(x)
	if err := op.store.WriteJSON(op.id, record.ManifestFile, m); err != nil {
		op.logger(ctx).WithError(err).Error("write manifest")
	}
	op.logger(ctx).WithField("drain_ms", ms(t1.Sub(t0))).WithField("gate_ms", ms(t2.Sub(t1))).
		WithField("finalize_ms", ms(time.Since(t2))).WithField("verdict", m.Gate.Verdict).Info("exit path done")
	if m.Gate.Verdict != spec.VerdictPass {
		op.logger(ctx).WithField("verdict", m.Gate.Verdict).WithField("violations", len(m.Gate.Violations)).Warn("product gate did not pass")
		if code := op.cfg.GateFailedExitStatus; code != 0 {
			op.override = &code
			op.held.override = &code
		}
	}
}

// Wait answers for the init only once its exit path is done.
func (s *service) Wait(ctx context.Context, r *taskAPI.WaitRequest) (*taskAPI.WaitResponse, error) {
	resp, err := s.TTRPCTaskService.Wait(ctx, r)
	if err != nil || r.ExecID != "" {
		return resp, err
	}
	op := s.get(r.ID)
	if op == nil || op.current() == opCreated {
		return resp, nil
	}
	select {
	case <-op.done:
		if op.override != nil {
			resp.ExitStatus = *op.override
		}
		return resp, nil
	case <-ctx.Done():
		return nil, errgrpc.ToGRPC(ctx.Err())
	}
}

// Delete waits for a started init's exit path, deletes the inner task, and
// removes whatever the operation still holds.
func (s *service) Delete(ctx context.Context, r *taskAPI.DeleteRequest) (*taskAPI.DeleteResponse, error) {
	op := s.get(r.ID)
	if r.ExecID != "" || op == nil {
		return s.TTRPCTaskService.Delete(ctx, r)
	}
	if op.current() != opCreated {
		select {
		case <-op.done:
		case <-ctx.Done():
			return nil, errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: task %s is still finalizing its exit; retry the delete", r.ID)
		}
		op.held.waitPublished(ctx)
	}
	resp, err := s.TTRPCTaskService.Delete(ctx, r)
	if err != nil {
		return nil, err
	}
	if op.override != nil {
		resp.ExitStatus = *op.override
	}
	if op.current() == opCreated {
		// Never started: nothing ran, nothing to gate; say so.
		x := exitFacts{}
		op.finalizeNetwork(ctx, &x)
		if err := op.store.WriteJSON(op.id, record.ManifestFile, op.manifest(x)); err != nil {
			op.logger(ctx).WithError(err).Error("write manifest")
		}
	}
	op.mu.Lock()
	if op.deadline != nil {
		op.deadline.Stop()
	}
	op.mu.Unlock()
	s.pub.disarm(r.ID)
	op.transition(opDeleted)
	if op.removeTable(ctx) != "" {
		s.markCleaned(ctx, op)
	} else {
		op.logger(ctx).Error("network table left after delete; the shim's cleanup path retries it")
	}
	s.drop(r.ID)
	// Records retention, off the start path: a bounded background run.
	retention.Background(ctx, op.store, retention.FromConfig(op.cfg.Retention))
	return resp, nil
}
