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

// A warm helper waits at the idle class and leaves it when taken: the gate
// never runs at the idle class. It is then the exit path's, once.
func TestWarmGateTake(t *testing.T) {
	reapChildren(t)
	useHelper(t, warmHelperScript)
	w := startWarmGate(log.L)
	<-w.ready
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
	gone := func(h *gateHelper) {
		t.Helper()
		for range 200 {
			if unix.Kill(h.cmd.Process.Pid, 0) == unix.ESRCH {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("released helper %d still runs", h.cmd.Process.Pid)
	}

	w := startWarmGate(log.L)
	w.release() // likely before its spawn is done
	<-w.ready
	if w.take() != nil {
		t.Fatal("a released warm helper was taken")
	}

	w = startWarmGate(log.L)
	<-w.ready
	h := w.h
	w.release()
	w.release()
	gone(h)

	w = startWarmGate(log.L)
	<-w.ready
	h = w.h
	w.releaseAfter(20 * time.Millisecond)
	gone(h)
	if w.take() != nil {
		t.Fatal("a warm helper past its keep was taken")
	}

	var none *warmGate
	none.releaseAfter(time.Millisecond)
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
	w := startWarmGate(log.L)
	defer w.release()
	<-w.ready
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
