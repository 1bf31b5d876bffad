package service

import (
	"os/exec"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/sys/reaper"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/gate"
)

// warmHelperScript reads its input to EOF and answers a passing result;
// a stdin closed without input (a release) ends it the same way.
const warmHelperScript = `cat >/dev/null; echo '{"verdict":"pass"}'`

func useHelper(t *testing.T, script string) {
	t.Helper()
	saved := gateHelperCommand
	t.Cleanup(func() { gateHelperCommand = saved })
	gateHelperCommand = func() (*exec.Cmd, func(), error) { return exec.Command("/bin/sh", "-c", script), func() {}, nil }
}

func policyOf(t *testing.T, pid int) uint32 {
	t.Helper()
	a, err := unix.SchedGetAttr(pid, 0)
	if err != nil {
		t.Fatalf("sched_getattr %d: %v", pid, err)
	}
	return a.Policy
}

// startedWarmGate is a warm gate armed to start its helper at once (and
// keep it an hour), once its spawn is done.
func startedWarmGate(t *testing.T) *warmGate {
	t.Helper()
	w := newWarmGate(log.L)
	w.arm(0, time.Hour)
	mustSpawn(t, w)
	return w
}

// spawning waits (up to 5 s) for w's spawn to begin and returns its ready
// channel; nil if w was dropped first.
func spawning(t *testing.T, w *warmGate) chan struct{} {
	t.Helper()
	for range 500 {
		w.mu.Lock()
		ready, dropped := w.ready, w.dropped
		w.mu.Unlock()
		if ready != nil || dropped {
			return ready
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the warm helper's spawn never began")
	return nil
}

// mustSpawn waits for w's spawn to begin and end; w must not be dropped
// first.
func mustSpawn(t *testing.T, w *warmGate) {
	t.Helper()
	ready := spawning(t, w)
	if ready == nil {
		t.Fatal("the warm gate was let go before its helper started")
	}
	<-ready
}

// A warm helper waits at the idle class and leaves it when taken: the gate
// never runs at the idle class. It is then the exit path's, once.
func TestWarmGateTake(t *testing.T) {
	reapChildren(t)
	useHelper(t, warmHelperScript)
	w := startedWarmGate(t)
	w.mu.Lock()
	h := w.h
	w.mu.Unlock()
	if h == nil {
		t.Fatal("no warm helper")
	}
	if p := policyOf(t, h.cmd.Process.Pid); p != unix.SCHED_IDLE {
		t.Fatalf("warm helper's policy %d, want SCHED_IDLE", p)
	}
	own, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := w.take()
	if got != h {
		t.Fatalf("take = %v, want the warm helper", got)
	}
	if p := policyOf(t, h.cmd.Process.Pid); p != own.Policy {
		t.Fatalf("taken helper's policy %d, want the shim's %d", p, own.Policy)
	}
	if w.take() != nil {
		t.Fatal("the warm helper was taken twice")
	}
	res, err := got.run([]byte("{}"), 10*time.Second)
	if err != nil || res.Verdict != gate.Pass {
		t.Fatalf("warm helper's result %+v, %v", res, err)
	}
}

// Released, before or after its spawn is done, or after warmKeep, a warm
// helper exits and is never taken; a nil warmGate (no diff) is inert.
func TestWarmGateRelease(t *testing.T) {
	reapChildren(t)
	useHelper(t, warmHelperScript)
	// A released helper, at the idle scheduling class, may not run to
	// see its input end on a busy machine: it is killed 5 s on (abandon),
	// so wait past that.
	gone := func(h *gateHelper) {
		t.Helper()
		for range 1000 {
			if unix.Kill(h.cmd.Process.Pid, 0) == unix.ESRCH {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("released helper %d still runs", h.cmd.Process.Pid)
	}

	w := newWarmGate(log.L)
	w.arm(0, time.Hour)
	w.release() // likely before its spawn is done, or begun
	if ready := spawning(t, w); ready != nil {
		<-ready
	}
	if w.take() != nil {
		t.Fatal("a released warm helper was taken")
	}

	w = startedWarmGate(t)
	h := w.h
	w.release()
	w.release()
	gone(h)

	w = newWarmGate(log.L)
	w.arm(0, 200*time.Millisecond)
	mustSpawn(t, w)
	w.mu.Lock()
	h = w.h
	w.mu.Unlock()
	if h == nil {
		t.Fatal("no warm helper")
	}
	gone(h)
	if w.take() != nil {
		t.Fatal("a warm helper past its keep was taken")
	}

	var none *warmGate
	none.arm(0, time.Millisecond)
	none.release()
	if none.take() != nil {
		t.Fatal("a nil warm gate gave a helper")
	}
}

// A warm helper waiting for its input never holds up the reaper: every
// exit in the shim goes to every subscriber, and the helper's is drained
// from its spawn on. 40 other children (more than a subscription buffers)
// exit and are waited for while it waits.
func TestWarmGateDoesNotHoldReaper(t *testing.T) {
	reapChildren(t)
	useHelper(t, warmHelperScript)
	w := startedWarmGate(t)
	defer w.release()
	start := time.Now()
	for i := range 40 {
		cmd := exec.Command("/bin/true")
		ec, err := reaper.Default.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reaper.Default.WaitTimeout(cmd, ec, 5*time.Second); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("40 children took %s beside a waiting warm helper", took)
	}
}

// A task that ends (exited, whether the gate then takes or not) or is
// deleted (release) before warmAfter never starts a helper: take gives
// nil at once, and no spawn follows. Armed, a still-running task's helper
// starts after the delay, and an exit after that leaves it for take.
func TestWarmGateStartsOnlyAfterDelay(t *testing.T) {
	reapChildren(t)
	useHelper(t, warmHelperScript)
	const after = 100 * time.Millisecond

	w := newWarmGate(log.L)
	w.arm(after, time.Hour)
	if w.take() != nil {
		t.Fatal("a warm gate taken before its start gave a helper")
	}
	w2 := newWarmGate(log.L)
	w2.arm(after, time.Hour)
	w2.release()
	w3 := newWarmGate(log.L) // the init exits, and the gate needs no helper
	w3.arm(after, time.Hour)
	w3.exited()
	time.Sleep(3 * after)
	for _, g := range []*warmGate{w, w2, w3} {
		g.mu.Lock()
		ready, h := g.ready, g.h
		g.mu.Unlock()
		if ready != nil || h != nil {
			t.Fatal("a warm gate let go before its start spawned a helper")
		}
	}

	w = newWarmGate(log.L)
	begun := time.Now()
	w.arm(after, time.Hour)
	defer w.release()
	mustSpawn(t, w)
	if took := time.Since(begun); took < after {
		t.Fatalf("the helper started %s after arm, before its delay %s", took, after)
	}
	w.exited()
	h := w.take()
	if h == nil {
		t.Fatal("no warm helper after the delay")
	}
	res, err := h.run([]byte("{}"), 10*time.Second)
	if err != nil || res.Verdict != gate.Pass {
		t.Fatalf("warm helper's result %+v, %v", res, err)
	}
}
