package runcfront

import (
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
// dies before it writes (runc then says the container stopped).
//
// It blocks on nothing but the fifo and the init's pidfd, both polled, and
// starts no goroutine: the shim runs it in its own process (the front's
// monitor there), where a goroutine stuck in a fifo's open would outlive
// the call with its thread.
func Start(dir string) (handled bool, err error) {
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
	data, ended, err := readFifo(fd, pidfd)
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
// it (ended), waiting on it and on the init's pidfd. An init that is gone
// with nothing written and no writer seen ends the wait with ended false.
func readFifo(fd, pidfd int) (data []byte, ended bool, err error) {
	buf := make([]byte, 64)
	initGone := false
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(pidfd), Events: unix.POLLIN}}
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
		if initGone {
			return data, false, nil
		}
		initGone = fds[1].Revents != 0
	}
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
