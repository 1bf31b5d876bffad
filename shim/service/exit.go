package service

import (
	"context"
	"fmt"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/retention"
	"github.com/gensee/gensee/spec"
)

// Start arms the exit watch before the inner Start (an instant exit cannot
// slip past it), then the contract deadline, the exit path and the
// sensors, in that order.
func (s *service) Start(ctx context.Context, r *taskAPI.StartRequest) (*taskAPI.StartResponse, error) {
	op := s.get(r.ID)
	if r.ExecID != "" || op == nil {
		return s.TTRPCTaskService.Start(ctx, r)
	}
	if err := op.waitRecorded(); err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: task %s: the admission record was not written (%v); the init was not started: delete the task and create it again", r.ID, err)
	}
	if err := op.life.move("start", opStarting); err != nil {
		return nil, errgrpc.ToGRPC(fmt.Errorf("gensee: task %s: %w", r.ID, err))
	}
	op.held = s.pub.arm(r.ID, op.done)
	op.startedAt = s.now()
	// The init's exit, watched from before it can happen (it is blocked in
	// runc init, so its pid cannot be reused yet): the exit pipeline starts
	// on it, beside the inner service's handling of that exit. Only where
	// the init is its pid namespace's init, whose exit ends every process
	// in it: in a joined one an exec may still be on its way into the
	// cgroup, and the inner Wait answers only once the inner service has
	// refused new execs and seen the started ones out.
	var watch *cgroup.ExitWatch
	if sub := op.admission.Subject; sub != nil && op.ownPidns {
		watch = cgroup.WatchExit(cgroup.Proc{PID: sub.InitPID, Start: sub.StartTime})
	}
	done := s.monitor.starting(r.ID, ctx) // the init's start, in the shim, bounded by ctx
	resp, err := s.TTRPCTaskService.Start(ctx, r)
	done()
	if err != nil {
		if watch != nil {
			watch.Close()
		}
		// The init never ran: nothing to finalize, nothing to hold (an
		// exit the inner service already forwarded goes out now).
		s.pub.release(r.ID, op.held)
		op.warm.release()
		op.life.move("fail to start", opCreated)
		return nil, err
	}
	op.life.move("start", opRunning)
	op.warm.arm(warmAfter, warmKeep)
	s.startDeadline(op)
	// The exit path is armed before the sensors start, which takes a few
	// milliseconds: a trivial init is gone by then, and the gate helper's
	// start-up overlaps theirs. The pipeline drains and stops the sensors
	// only once they have started. They start beside Start's answer (about
	// 0.5 ms of a trivial task's start on the 2-vCPU VMs): the init runs
	// from the inner Start on, so they see the same whether the answer
	// waits for them or not, and everything that reads them (the exit
	// path, Delete, Shutdown) waits for their start (SensorsDue).
	started := op.net.SensorsDue()
	go s.watchExit(op, watch)
	go func() {
		defer started()
		op.net.StartSensors(op.admission.Subject)
	}()
	return resp, nil
}

// startDeadline kills the task when the contract's deadline passes.
func (s *service) startDeadline(op *operation) {
	engine.ArmDeadline(&op.deadline, op.contract, op.net, "task", func() error {
		_, err := s.TTRPCTaskService.Kill(s.ctx, &taskAPI.KillRequest{ID: op.containerID, Signal: uint32(unix.SIGKILL), All: true})
		return err
	}, op.logger(s.ctx))
}

// watchExit waits for the init to exit, then runs the exit pipeline,
// whose last step releases Wait, Delete and the held TaskExit. The
// pipeline starts as soon as the watch (the init's pidfd, only where the
// init is pid 1 of its own pid namespace; nil: none) says the init is
// gone, and with it every process of its pid namespace, or the inner Wait
// answers, whichever comes first: the drain and the gate overlap the inner
// service's own exit handling (its stdio drained, its exit processed). The
// manifest's status is the one the pidfd gives (waitid without reaping,
// read at once), else the inner Wait's. The rootfs stays mounted until
// the release, which starts its unmount (unmountReleased), and the cgroup
// present until the inner Delete, which waits for the release and for the
// inner Wait's answer.
func (s *service) watchExit(op *operation, watch *cgroup.ExitWatch) {
	ctx := s.ctx
	// Whatever happens in the pipeline, Wait and Delete are released.
	defer op.release(nil)
	var exited <-chan struct{} // nil: never
	if watch != nil {
		defer watch.Close()
		exited = watch.Done()
	}
	type answer struct {
		resp *taskAPI.WaitResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := s.TTRPCTaskService.Wait(ctx, &taskAPI.WaitRequest{ID: op.containerID})
		answered <- answer{resp, err}
		close(op.innerExited)
	}()
	var got *answer
	var status *uint32 // the pidfd's, read before the reaper takes the init
	select {
	case <-exited:
		if st, ok := watch.Status(); ok {
			status = &st
		}
	case a := <-answered:
		got = &a
	}
	op.warm.exited()
	op.exitPath = true
	x := engine.Facts{Started: op.startedAt}
	x.Deadline = op.deadline.Stop()
	x.WaitStatus = func() *uint32 {
		defer op.life.move("exit", opExited)
		if got == nil && status != nil {
			return status
		}
		if got == nil {
			a := <-answered
			got = &a
		}
		if got.err != nil {
			op.logger(ctx).WithError(got.err).Error("wait for init exit")
			return nil
		}
		st := got.resp.ExitStatus
		return &st
	}
	op.exit.Run(ctx, x)
}

// Wait answers for the init only once its exit path is done. The
// operation is looked up before the inner Wait: a Delete that drops it
// meanwhile must not turn an overridden status back into the init's.
func (s *service) Wait(ctx context.Context, r *taskAPI.WaitRequest) (*taskAPI.WaitResponse, error) {
	var op *operation
	if r.ExecID == "" {
		op = s.get(r.ID)
	}
	resp, err := s.TTRPCTaskService.Wait(ctx, r)
	if err != nil || op == nil {
		return resp, err
	}
	// Only a started init's exit pipeline closes done: a Start still in
	// flight settles first, and a task that never ran answers as it is.
	ran, err := op.life.settled(ctx)
	if err != nil {
		return nil, errgrpc.ToGRPC(err)
	}
	if !ran {
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

// Delete waits for a started init's exit path and for its held TaskExit
// to go out (the TaskDelete that follows never overtakes it), deletes the
// inner task, finalizes a never-started one, and removes whatever the
// operation still holds. The state is claimed (deleting) before the inner
// Delete, so a concurrent Start is refused rather than racing it.
func (s *service) Delete(ctx context.Context, r *taskAPI.DeleteRequest) (*taskAPI.DeleteResponse, error) {
	op := s.get(r.ID)
	if r.ExecID != "" || op == nil {
		resp, err := s.TTRPCTaskService.Delete(ctx, r)
		if err == nil {
			s.dropStdio(r.ID, r.ExecID)
		}
		return resp, err
	}
	op.waitRecorded() // its writes land before the records are finalized
	was, err := s.claimDelete(ctx, op)
	if err != nil {
		return nil, err
	}
	if was == opExited {
		// The inner service has handled the init's exit (the pipeline
		// may release before it does), and the held TaskExit goes out
		// before the TaskDelete can.
		select {
		case <-op.innerExited:
		case <-ctx.Done():
			op.life.move("fail to delete", was)
			return nil, stillFinalizing(op)
		}
		op.held.waitPublished(ctx)
	}
	// The inner Delete unmounts no rootfs: the shim mounted it. Once the
	// exit path has drained the task and gated its product, nothing reads
	// the rootfs any more, and runc's delete of a spec without hooks does
	// not touch it: its release started the unmount (unmountReleased; an
	// overlay unmount syncs the upper filesystem), which Delete waits for
	// beside the inner Delete, and a retried Delete needs none of it
	// either. A spec's poststop hooks run in runc's delete, on the rootfs,
	// and a task that never started still has its init blocked in runc
	// init: after, for both, as for an unmount that failed.
	unmounted := op.unmounting
	resp, err := s.TTRPCTaskService.Delete(ctx, r)
	if unmounted != nil {
		<-unmounted
	}
	if err != nil {
		op.life.move("fail to delete", was)
		return nil, err
	}
	s.dropStdio(r.ID, "")
	if op.ownRootfs && (unmounted == nil || !op.unmountedOK) {
		unmountRootfs(ctx, op.bundle, op.containerID)
	}
	if op.override != nil {
		resp.ExitStatus = *op.override
	}
	if was == opCreated {
		// Never started: nothing ran, nothing to gate; say so.
		op.exit.NeverStarted(ctx)
	}
	op.deadline.Stop()
	op.warm.release()
	s.pub.disarm(r.ID)
	op.life.move("delete", opDeleted)
	if op.net.Remove(ctx) != "" {
		s.markCleaned(ctx, op)
	} else {
		op.logger(ctx).Error("network table left after delete; the shim's cleanup path retries it")
	}
	s.drop(r.ID)
	// Records retention, off the start path: a bounded background run.
	// Its re-verification may raise product_mismatch on another
	// operation: the notify command hears of it as of any finding.
	retention.Background(ctx, op.store, retention.FromConfig(op.cfg.Retention), func(opID string, f spec.Finding) {
		notifierFor(op, opID, "").Finding(f)
	})
	return resp, nil
}

// claimDelete claims op for Delete (lifecycle.claimDelete), waiting for a
// Start in flight to settle and for a started init's exit pipeline to
// release, bounded by ctx.
func (s *service) claimDelete(ctx context.Context, op *operation) (opState, error) {
	for {
		was, wait, err := op.life.claimDelete(op.done)
		if err != nil {
			return was, errgrpc.ToGRPC(fmt.Errorf("gensee: task %s: %w", op.containerID, err))
		}
		if !wait {
			return was, nil
		}
		if was == opStarting {
			if _, err := op.life.settled(ctx); err != nil {
				return was, errgrpc.ToGRPC(err)
			}
			continue
		}
		select {
		case <-op.done:
		case <-ctx.Done():
			return was, stillFinalizing(op)
		}
	}
}

// stillFinalizing is Delete's answer while the exit path (or the inner
// service's handling of the exit) outlasts the caller's context.
func stillFinalizing(op *operation) error {
	return errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: task %s is still finalizing its exit; retry the delete", op.containerID)
}
