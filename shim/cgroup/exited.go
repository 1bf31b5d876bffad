package cgroup

import (
	"errors"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ExitWatch follows one process's exit through a pidfd.
type ExitWatch struct {
	done chan struct{}
	mu   sync.Mutex
	f    *os.File // nil when no watch could be set up, or once closed
}

// WatchExit watches process p, opened as a non-blocking pidfd verified
// against its start time and waited for in the runtime's poller: no thread
// is held while p runs. Done closes once p has exited; a p already gone
// (ErrGone) closes it at once, and a watch that cannot be set up (no
// pidfd, no poller) leaves it open: Done is a hint that may never come.
// Watching reaps nothing: the exit status stays with whoever waits for p.
// Close releases the pidfd.
func WatchExit(p Proc) *ExitWatch {
	w := &ExitWatch{done: make(chan struct{})}
	fd, err := openVerifiedFlags(p, 0, unix.PIDFD_NONBLOCK)
	if errors.Is(err, ErrGone) {
		close(w.done)
		return w
	}
	if err != nil {
		return w
	}
	w.f = os.NewFile(uintptr(fd), "pidfd")
	rc, err := w.f.SyscallConn()
	if err != nil {
		w.Close()
		return w
	}
	go func() {
		var gone bool
		// Read waits for readability between calls until fn says done;
		// a pidfd is readable once its process exited. It fails when the
		// file is closed or could not join the poller.
		err := rc.Read(func(fd uintptr) bool {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, 0)
			switch {
			case errors.Is(err, unix.EINTR):
				return false
			case err != nil:
				return true // unknown: leave Done open
			}
			gone = n > 0 && pfd[0].Revents != 0
			return gone
		})
		if err == nil && gone {
			close(w.done)
		}
	}()
	return w
}

// Done is closed once the process has exited.
func (w *ExitWatch) Done() <-chan struct{} { return w.done }

// si_code values of SIGCHLD (asm-generic/siginfo.h).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// sigchld is the SIGCHLD part of siginfo_t (si_pid, si_uid, si_status
// after the three ints and their padding), as the kernel lays it out on
// 64-bit Linux.
type sigchld struct {
	signo, errno, code, _ int32
	pid                   int32
	uid                   uint32
	status                int32
}

// Status is the exited process's status as containerd's runc shim reports
// it (its exit code, or 128 plus the signal that killed it), read with
// waitid(P_PIDFD, WNOWAIT): the process stays a zombie for its reaper.
// Only the parent (or the subreaper it was handed to) can read it; ok is
// false when the status cannot be read: not exited, already reaped, not
// the caller's child, or no watch.
func (w *ExitWatch) Status() (status uint32, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil || unsafe.Sizeof(uintptr(0)) != 8 { // sigchld's layout is 64-bit Linux's
		return 0, false
	}
	var info unix.Siginfo
	rc, err := w.f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var werr error
	if err := rc.Control(func(fd uintptr) {
		werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	}); err != nil || werr != nil {
		return 0, false
	}
	c := (*sigchld)(unsafe.Pointer(&info))
	if c.signo != int32(unix.SIGCHLD) || c.pid == 0 {
		return 0, false // WNOHANG: not exited yet
	}
	switch c.code {
	case cldExited:
		return uint32(c.status), true
	case cldKilled, cldDumped:
		return 128 + uint32(c.status), true
	}
	return 0, false
}

// Close releases the pidfd; Done stays as it is.
func (w *ExitWatch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}
