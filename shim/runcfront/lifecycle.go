package runcfront

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// execFifo is runc's exec fifo in a container's state directory
// (libcontainer's execFifoFilename).
const execFifo = "exec.fifo"

// Start starts the created container whose runc state directory is dir,
// as `runc start` does: it opens the exec fifo (waiting for the blocked
// `runc init` to open its end), reads it to EOF (the init's byte, then
// its exec closes the fifo) and removes it. handled is false, with
// nothing done, when runc must answer: no fifo (not a created
// container), no state, a frozen cgroup (runc: paused), an init already
// gone, or an init that dies
// before it opens the fifo (runc then says the container stopped).
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
	opened := make(chan openResult, 1)
	go func() {
		// Blocks until the init opens the fifo for writing.
		f, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_CLOEXEC, 0)
		opened <- openResult{f, err}
	}()
	exited := make(chan struct{})
	go func() {
		waitExit(pidfd)
		close(exited)
	}()
	select {
	case r := <-opened:
		return r.consume(fifo)
	case <-exited:
		select {
		case r := <-opened:
			return r.consume(fifo)
		default:
			// The init ended without opening the fifo: nothing was
			// read, and runc names the state.
			return false, nil
		}
	}
}

// openResult is the exec fifo's open: the file, or why not.
type openResult struct {
	f   *os.File
	err error
}

// consume reads the opened fifo to EOF and removes it (libcontainer's
// handleFifoResult); a fifo that did not open was not read, and runc
// answers.
func (r openResult) consume(fifo string) (handled bool, err error) {
	if r.err != nil {
		return false, nil
	}
	return true, consumeFile(r.f, fifo)
}

func consumeFile(f *os.File, fifo string) error {
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("read exec fifo: %w", err)
	}
	if len(data) == 0 {
		return errors.New("cannot start an already running container")
	}
	if err := os.Remove(fifo); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove exec fifo: %w", err)
	}
	return nil
}

// waitExit returns once the process of pidfd has exited.
func waitExit(pidfd int) {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return
		}
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
