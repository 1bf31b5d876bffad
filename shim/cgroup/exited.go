package cgroup

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Exited returns a channel closed once process p has exited, and stop,
// which releases what watches it (the channel then stays open unless it
// was already closed). p is opened as a non-blocking pidfd verified
// against its start time and waited for in the runtime's poller: no
// thread is held while p runs. A p already gone (ErrGone) closes the
// channel at once; a watch that cannot be set up (no pidfd, no poller)
// leaves it open: a caller must treat it as a hint that may never come.
// Waiting on a pidfd reaps nothing: the exit status stays with whoever
// waits for p.
func Exited(p Proc) (exited <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	fd, err := openVerifiedFlags(p, 0, unix.PIDFD_NONBLOCK)
	if errors.Is(err, ErrGone) {
		close(ch)
		return ch, func() {}
	}
	if err != nil {
		return ch, func() {}
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return ch, func() {}
	}
	go func() {
		var gone bool
		// Read waits for readability between calls until fn says done;
		// a pidfd is readable once its process exited. It fails when f
		// is closed (stop) or could not join the poller.
		err := rc.Read(func(fd uintptr) bool {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, 0)
			switch {
			case errors.Is(err, unix.EINTR):
				return false
			case err != nil:
				return true // unknown: leave the channel open
			}
			gone = n > 0 && pfd[0].Revents != 0
			return gone
		})
		if err == nil && gone {
			close(ch)
		}
	}()
	return ch, func() { f.Close() }
}
