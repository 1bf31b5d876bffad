package runcfront

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// execFifo is runc's exec fifo in a container's state directory
// (libcontainer's execFifoFilename).
const execFifo = "exec.fifo"

// Start starts the created container whose runc state directory is dir,
// as `runc start` does: it opens the exec fifo, reads it to EOF (the byte
// the blocked `runc init` writes once the fifo has a reader, then its exec
// closes the fifo) and removes it. handled is false, with nothing done,
// when runc must answer: no fifo (not a created container), no state, a
// frozen cgroup (runc: paused), an init already gone, or an init that
// dies before it writes (runc then says the container stopped). When ctx
// ends before the init has written its byte, Start gives up with ctx's
// error, as a run of the front killed for its call's context does: the
// container is not started by it (an init stopped in its open waits there
// again; one that had opened dies on its write to a fifo with no reader;
// an init that writes in the instant between the last look and the
// close is released, as with runc). When ctx ends after the byte was
// read, the start has happened and is answered as done, without waiting
// for the fifo's close.
//
// It blocks on nothing but the fifo, the init's pidfd and ctx, all
// polled, and leaves no goroutine behind: the shim runs it in its own
// process (the front's monitor there), where a goroutine stuck in a
// fifo's open would outlive the call with its thread.
func Start(ctx context.Context, dir string) (handled bool, err error) {
	fifo := filepath.Join(dir, execFifo)
	var fst unix.Stat_t
	if unix.Lstat(fifo, &fst) != nil || fst.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false, nil
	}
	st, err := readState(dir)
	if err != nil || st.frozen() {
		return false, nil
	}
	init := st.init()
	pidfd, err := unix.PidfdOpen(init.PID, 0)
	if err != nil {
		return false, nil
	}
	defer unix.Close(pidfd)
	// Checked after the pidfd is open: the pidfd is the init's, not a
	// process that took its pid since.
	if !running(init) {
		return false, nil
	}
	// O_NONBLOCK: the open returns at once, and the fifo has its reader
	// from then on (the init's open for writing, blocked until then,
	// returns). Until a writer has come, poll reports nothing on it.
	fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	defer unix.Close(fd)
	if unix.Fstat(fd, &fst) != nil || fst.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false, nil
	}
	cancel, release, err := cancelFD(ctx)
	if err != nil {
		return false, nil
	}
	defer release()
	data, ended, err := readFifo(fd, pidfd, cancel)
	if err == errCanceled {
		return true, fmt.Errorf("runc start: %w", context.Cause(ctx))
	}
	if err != nil {
		return true, err
	}
	if !ended {
		// The init ended without writing: nothing was read, and runc
		// names the state.
		return false, nil
	}
	if len(data) == 0 {
		return true, errors.New("cannot start an already running container")
	}
	if err := os.Remove(fifo); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("remove exec fifo: %w", err)
	}
	return true, nil
}

// readFifo reads the exec fifo fd (non-blocking) until its writer closed
// it (ended), waiting on it, on the init's pidfd and on cancel (cancelFD;
// -1: none). An init that is gone with nothing written and no writer seen
// ends the wait with ended false; cancel readable before anything was
// read ends it with errCanceled, and after the byte was read, as if the
// writer had closed (the container is started).
func readFifo(fd, pidfd, cancel int) (data []byte, ended bool, err error) {
	buf := make([]byte, 64)
	initGone := false
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(pidfd), Events: unix.POLLIN}, {Fd: int32(cancel), Events: unix.POLLIN}}
		timeout := -1
		if initGone {
			timeout = 0 // one more look at the fifo, then give up
		}
		if _, err := unix.Poll(fds, timeout); err != nil {
			if err == unix.EINTR {
				continue
			}
			return data, false, fmt.Errorf("wait on exec fifo: %w", err)
		}
		if fds[0].Revents != 0 {
			n, err := unix.Read(fd, buf)
			switch {
			case n > 0:
				data = append(data, buf[:n]...)
			case err == nil: // EOF: the writer closed it
				return data, true, nil
			case err != unix.EAGAIN && err != unix.EINTR:
				return data, false, fmt.Errorf("read exec fifo: %w", err)
			}
			continue
		}
		if fds[2].Revents != 0 {
			// One last look: a byte written since the poll means the
			// init is released too.
			if n, _ := unix.Read(fd, buf); n > 0 {
				data = append(data, buf[:n]...)
			}
			if len(data) == 0 {
				return data, false, errCanceled
			}
			// The init's byte is read: it is released, and the start
			// has happened. The fifo's close, which runc's start waits
			// for, can come much later (runc 1.2 and 1.3 hold it
			// through startContainer hooks, a stopped init holds it
			// for as long as it is stopped): the start is answered as
			// done, the task recorded running, rather than hold the
			// call past its caller's end.
			return data, true, nil
		}
		if initGone {
			return data, false, nil
		}
		initGone = fds[1].Revents != 0
	}
}

// errCanceled is readFifo's error when its cancel fd fired; Start gives
// ctx's own error.
var errCanceled = errors.New("canceled")

// cancelFD is an eventfd that becomes readable when ctx ends, for poll,
// and its release (which waits for a signal in flight before it closes
// the fd); -1 and a no-op for a ctx that never ends.
func cancelFD(ctx context.Context) (int, func(), error) {
	if ctx.Done() == nil {
		return -1, func() {}, nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, nil, err
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		one := [8]byte{1} // the counter's increment, host order (little-endian here)
		unix.Write(efd, one[:])
	})
	return efd, func() {
		if !stop() {
			<-fired
		}
		unix.Close(efd)
	}, nil
}

// Delete removes the stopped container whose runc state directory is
// dir, as `runc delete` does for the plain case (the package comment):
// its cgroup paths, then the state directory. handled is false when runc
// must answer: no state, an init still running (runc kills a created
// one, refuses a running one), anything plainDestroy refuses, a frozen
// cgroup, or a cgroup path one rmdir does not remove (runc retries, with
// what was removed already gone for it too).
func Delete(dir string) (handled bool, err error) {
	st, err := readState(dir)
	if err != nil || !st.plainDestroy() || running(st.init()) || st.frozen() {
		return false, nil
	}
	dirs, ok := st.cgroupDirs()
	if !ok {
		return false, nil
	}
	for _, d := range dirs {
		if err := unix.Rmdir(d); err != nil && err != unix.ENOENT {
			return false, nil
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return true, fmt.Errorf("unable to remove container state dir: %w", err)
	}
	return true, nil
}
