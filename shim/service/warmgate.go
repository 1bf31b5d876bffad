package service

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
)

// warmAfter is how long after Start a task must still be running before a
// warm gate helper is started for it. A task that ends sooner (P1's
// `true`, a probe) rarely leaves anything beyond its upper dir's baseline,
// which the shim gates without a helper (helperGate.baselineFirst): a
// helper started at Create for it would be exec'd, started and let go for
// nothing, on its Start and exit paths (about 1.5-2 ms of a `ctr run
// --rm` on the 2-vCPU VMs, measured). One that does leave a product pays
// the helper's cold start at its exit instead (4-6 ms).
const warmAfter = 10 * time.Millisecond

// warmKeep is how long after Start a warm gate helper waits for the init's
// exit before it is let go: a short task (a build step, a CI job) finds it
// started; a long one pays a cold start at its exit, and its shim holds
// no helper while it runs (a sleeping container costs the shim alone).
const warmKeep = 500 * time.Millisecond

// warmGate is a gate helper started while the task runs (warmAfter after
// Start) and then put in the idle scheduling class, so that a short
// task's exit path finds it past its exec and Go start-up (about 2 ms of
// CPU and 4-6 ms of the exit path on the 2-vCPU VMs) without its
// start-up having taken CPU from the task, containerd or the shim: a
// SCHED_IDLE thread runs only when nothing else wants the CPU (its exec
// and the first instants of its start-up still run in the shim's class).
// The exit path takes it (take), or takes nothing when it was not started
// yet, and puts its threads back in the shim's class before handing it
// its input; Start arms its start after warmAfter and its release after
// warmKeep, Delete releases it. It is the same helper process as a cold
// one, with the same isolation: a panic or hang in it costs the gate its
// time limit and a failed verdict, and closing its stdin makes it exit.
type warmGate struct {
	log *log.Entry

	mu sync.Mutex
	// ready is nil until the spawn starts, then closed when it is done,
	// h set or not.
	ready   chan struct{}
	h       *gateHelper // nil: not started, failed, taken or let go
	dropped bool
	spawn   *time.Timer // the start armed by Start (arm)
	timer   *time.Timer // the release armed by Start (arm)
}

// newWarmGate is a warm gate for a created task, its helper not started.
func newWarmGate(l *log.Entry) *warmGate {
	return &warmGate{log: l}
}

// arm starts the helper after after, unless it is taken or let go before,
// and lets it go after keep unless it is taken before (both from now).
func (w *warmGate) arm(after, keep time.Duration) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped {
		return
	}
	if w.spawn == nil && w.ready == nil {
		w.spawn = time.AfterFunc(after, w.start)
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(keep, w.release)
	}
}

// start spawns the helper, unless it was taken or let go first or is
// already started.
func (w *warmGate) start() {
	w.mu.Lock()
	if w.dropped || w.ready != nil {
		w.mu.Unlock()
		return
	}
	ready := make(chan struct{})
	w.ready = ready
	w.mu.Unlock()
	defer close(ready)
	h, err := spawnGateHelper(true)
	if err != nil {
		w.log.WithError(err).Warn("start warm gate helper; the exit path starts one")
		return
	}
	if err := setSchedClass(h.proc, unix.SCHED_IDLE, 0); err != nil {
		w.log.WithError(err).Debug("warm gate helper keeps the shim's scheduling class")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped {
		go h.abandon()
		return
	}
	w.h = h
}

// take returns the warm helper, its threads back in the calling thread's
// scheduling class, or nil: none was started (and none will be now), it
// failed, or it was let go (the caller then starts one). It waits for a
// spawn in flight.
func (w *warmGate) take() *gateHelper {
	if w == nil {
		return nil
	}
	ready := w.noStart()
	if ready == nil { // not started: nor will it be
		return nil
	}
	<-ready
	h := w.claim()
	if h == nil {
		return nil
	}
	if h.gone() { // died while it waited (the OOM killer, say): start one
		h.stdin.Close()
		return nil
	}
	own, err := unix.SchedGetAttr(0, 0)
	if err == nil {
		err = setSchedClass(h.proc, own.Policy, own.Nice)
	}
	if err != nil {
		// Never gate at the idle class: under load it might not run
		// before its time limit.
		w.log.WithError(err).Warn("warm gate helper: restore its scheduling class; the exit path starts one")
		go h.abandon()
		return nil
	}
	return h
}

// exited is the init's exit, seen before the exit path's gate: a helper
// not started by then never starts (the gate starts one if it needs one);
// one started stays for take, or release.
func (w *warmGate) exited() {
	if w == nil {
		return
	}
	w.noStart()
}

// noStart lets a helper not started yet never start, and returns the
// spawn's ready channel (nil when there was none).
func (w *warmGate) noStart() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ready == nil {
		w.claimLocked()
	}
	return w.ready
}

// release lets an untaken helper exit (now, or as soon as its spawn is
// done) and one not started never start; safe more than once and after
// take.
func (w *warmGate) release() {
	if w == nil {
		return
	}
	if h := w.claim(); h != nil {
		go h.abandon()
	}
}

// claim takes the helper (nil if there is none yet or any more) and lets
// no later spawn, timer or claim have it.
func (w *warmGate) claim() *gateHelper {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claimLocked()
}

// claimLocked is claim with w.mu held.
func (w *warmGate) claimLocked() *gateHelper {
	h := w.h
	w.h, w.dropped = nil, true
	if w.spawn != nil {
		w.spawn.Stop()
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	return h
}

// setSchedClass puts every thread of process p in scheduling policy with
// nice value nice. The shim's reaper reaps its children as they exit, so
// each pass first checks p is still p (its start time), never another
// process that took its pid. Threads the process starts meanwhile inherit
// the class of the thread that starts them: a pass that finds every
// thread in the class ends it; a process whose threads keep changing is
// an error. A thread still being made by a thread in the old class during
// the last pass may keep that class: a warm helper puts all its threads in
// its main thread's class itself once it has its input (gate.HelperMain).
func setSchedClass(p cgroup.Proc, policy uint32, nice int32) error {
	pid := p.PID
	for range 4 {
		if !p.Alive() {
			return fmt.Errorf("gate helper %s: %w", p, cgroup.ErrGone)
		}
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return fmt.Errorf("list threads of %d: %w", pid, err)
		}
		changed := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Policy == policy && a.Nice == nice {
				continue
			}
			changed = true
			err = unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy, Nice: nice}, 0)
			if err != nil && err != unix.ESRCH {
				return fmt.Errorf("scheduling class of thread %d of %d: %w", tid, pid, err)
			}
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("threads of %d kept changing while their scheduling class was set", pid)
}
