package gate

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/roottest"
)

// matchMainThreadClass leaves no thread in the idle class when the main
// thread is out of it: every thread is put idle, the main thread alone
// back (as a shim pass that missed a thread being made would leave it),
// and after it every thread has the main thread's class.
func TestMatchMainThreadClass(t *testing.T) {
	roottest.Require(t) // leaving SCHED_IDLE takes CAP_SYS_NICE
	pid := os.Getpid()
	own, err := unix.SchedGetAttr(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	set := func(policy uint32) {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy, Nice: own.Nice}
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_SCHED_SETATTR, 0, uintptr(unsafe.Pointer(&attr)), 0); e != 0 {
			t.Fatalf("set every thread's policy %d: %v", policy, e)
		}
		runtime.KeepAlive(&attr)
	}
	t.Cleanup(func() { set(own.Policy) })
	set(unix.SCHED_IDLE)
	if err := unix.SchedSetAttr(pid, &unix.SchedAttr{Policy: own.Policy, Nice: own.Nice}, 0); err != nil {
		t.Fatal(err)
	}
	matchMainThreadClass()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // gone
		}
		if a.Policy != own.Policy || a.Nice != own.Nice {
			t.Errorf("thread %d: policy %d nice %d, want the main thread's %d, %d", tid, a.Policy, a.Nice, own.Policy, own.Nice)
		}
	}
}
