package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HelperInputLimit bounds the JSON input a helper reads.
const HelperInputLimit = 16 << 20

// HelperMain is the gate helper process: it reads an Input as JSON on
// stdin, runs the gate, makes what it staged durable (SyncStaged) and
// writes the Result as JSON on stdout, so the caller may write the
// manifest naming the staged products as soon as it has the result. Exit
// 0: a result was written (whatever its verdict); 1: the gate could not
// run or its staged copies could not be synced (message on stderr). The shim runs the gate in such a process so that a
// panic, a hang or a memory blow-up in the gate costs a failed verdict,
// never the shim or a hung Delete. It imports nothing of the shim, so the
// dedicated binary (cmd/gensee-gate-helper) stays small and starts fast.
func HelperMain(stdin io.Reader, stdout, stderr io.Writer) int {
	return helperMain(stdin, stdout, stderr, realSyncer)
}

func helperMain(stdin io.Reader, stdout, stderr io.Writer, s syncer) int {
	var in Input
	if err := json.NewDecoder(io.LimitReader(stdin, HelperInputLimit)).Decode(&in); err != nil {
		fmt.Fprintln(stderr, "gate helper: decode input:", err)
		return 1
	}
	if os.Getenv(HelperWarmEnv) == "1" {
		matchMainThreadClass()
	}
	res, err := Run(context.Background(), in)
	if err == nil {
		err = syncStaged(in.StagingDir, res, s)
	}
	if err != nil {
		fmt.Fprintln(stderr, "gate helper:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, "gate helper: encode result:", err)
		return 1
	}
	return 0
}

// HelperWarmEnv, set to 1 in a helper's environment, says the shim started
// it ahead and put it in the idle scheduling class while it waited, then
// back in its own class thread by thread before writing its input.
const HelperWarmEnv = "GENSEE_GATE_HELPER_WARM"

// matchMainThreadClass puts every thread of the helper in the scheduling
// class of its main thread, which the shim set: a thread that was being
// made while the shim went through the threads may have kept the idle
// class, and the gate must never run in it (under load it might not run
// before its time limit). AllThreadsSyscall runs the change on every
// thread with thread creation held off; without it (a cgo build) the
// shim's pass stands.
func matchMainThreadClass() {
	a, err := unix.SchedGetAttr(os.Getpid(), 0)
	if err != nil {
		return
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: a.Policy, Nice: a.Nice}
	syscall.AllThreadsSyscall(unix.SYS_SCHED_SETATTR, 0, uintptr(unsafe.Pointer(&attr)), 0)
	runtime.KeepAlive(&attr)
}
