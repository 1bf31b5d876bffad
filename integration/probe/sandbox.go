package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The host-run sandbox's probes (integration/hostrun_hostile_test.go),
// dispatched before main's switch so the containers' probe stays as it is.
// Same exit statuses: 0 the action succeeded, 1 it failed, 2 usage.
//
//	probe ptrace PID    PTRACE_ATTACH to PID (detached again at once)
//	probe pidfd PID     pidfd_open(PID) and signal 0 through the pidfd
//	probe mqueue NAME   create the POSIX message queue /NAME and leave it
//	probe clone3-into DIR   start a child in the cgroup at DIR with
//	                    clone3(CLONE_INTO_CGROUP); the child exits at once
//	probe tiocsti       push one byte into the input of fds 0, 1, 2 and of
//	                    /dev/tty (TIOCSTI); succeeds if any push did
var sandboxProbes = map[string]struct {
	args int
	run  func([]string) error
}{
	"ptrace":      {1, func(a []string) error { return withPID(a[0], ptraceAttach) }},
	"pidfd":       {1, func(a []string) error { return withPID(a[0], pidfdSignal) }},
	"mqueue":      {1, func(a []string) error { return mqCreate(a[0]) }},
	"clone3-into": {1, func(a []string) error { return cgclone(a[0]) }},
	"tiocsti": {0, func([]string) error {
		return tiocsti()
	}},
}

func init() {
	if len(os.Args) < 2 {
		return
	}
	p, ok := sandboxProbes[os.Args[1]]
	if !ok {
		return
	}
	if len(os.Args) != 2+p.args {
		fmt.Fprintln(os.Stderr, "usage: probe ptrace PID | pidfd PID | mqueue NAME | clone3-into DIR | tiocsti")
		os.Exit(2)
	}
	if err := p.run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	fmt.Println("probe: ok")
	os.Exit(0)
}

func withPID(s string, f func(int) error) error {
	pid, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("pid %q: %w", s, err)
	}
	return f(pid)
}

// ptraceAttach attaches to pid and detaches again (ptrace is per thread:
// the calling thread stays locked).
func ptraceAttach(pid int) error {
	runtime.LockOSThread()
	if err := syscall.PtraceAttach(pid); err != nil {
		return fmt.Errorf("ptrace attach %d: %w", pid, err)
	}
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, syscall.WALL, nil)
	syscall.PtraceDetach(pid)
	return nil
}

func pidfdSignal(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != nil {
		return fmt.Errorf("pidfd_send_signal %d: %w", pid, err)
	}
	return nil
}

// mqCreate creates the queue with the raw syscall (the name without libc's
// leading slash).
func mqCreate(name string) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	fd, _, errno := syscall.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), uintptr(unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC), 0o600, 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("mq_open /%s: %w", name, errno)
	}
	unix.Close(int(fd))
	return nil
}

// tiocsti tries to type one newline into each terminal the probe could
// reach; each attempt's result goes to stderr.
func tiocsti() error {
	var ok []string
	try := func(what string, fd int) {
		err := unix.IoctlSetPointerInt(fd, unix.TIOCSTI, '\n')
		fmt.Fprintf(os.Stderr, "tiocsti %s: %v\n", what, errOrOK(err))
		if err == nil {
			ok = append(ok, what)
		}
	}
	for fd := 0; fd <= 2; fd++ {
		try("fd"+strconv.Itoa(fd), fd)
	}
	if fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err != nil {
		fmt.Fprintf(os.Stderr, "tiocsti /dev/tty: open: %v\n", err)
	} else {
		try("/dev/tty", fd)
		unix.Close(fd)
	}
	if len(ok) == 0 {
		return errors.New("TIOCSTI failed on every terminal")
	}
	fmt.Fprintf(os.Stderr, "tiocsti pushed into %v\n", ok)
	return nil
}

func errOrOK(err error) string {
	if err == nil {
		return "pushed"
	}
	return err.Error()
}
