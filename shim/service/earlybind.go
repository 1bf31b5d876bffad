package service

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
)

// initPidFile is where the inner Create has runc write the init's pid
// (containerd's runc shim: process.InitPidFile in the bundle).
const initPidFile = "init.pid"

// earlyBind binds the boundary as soon as runc has made the init, beside
// what the inner Create still does after runc exits (the pid file read,
// the cgroup loaded, stdio, the TaskCreate event). runc renames the init's
// pid file into the bundle only once the init exists, in its cgroup and
// namespaces, blocked on its exec fifo: no image code has run. The pid is
// a hint: Create accepts the early bind only when the inner Create then
// answers with the same pid, and binds after it, as ever, when the pid
// file was not seen first.
type earlyBind struct {
	bundle string
	bind   func(pid int) error // what Create does with the init's pid

	mu      sync.Mutex
	started bool // bind was called; guarded by mu
	stopped bool // Create no longer wants it; guarded by mu
	watch   *os.File
	done    chan struct{} // closed once a started bind returned
	pid     int
	err     error
}

// watchInitPid starts watching bundle for the init's pid file; nil when
// the watch cannot be set up (Create binds after the inner Create then).
// bind runs at most once, on the pid read from the file.
func watchInitPid(bundle string, bind func(pid int) error) *earlyBind {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, bundle, unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return nil
	}
	e := &earlyBind{bundle: bundle, bind: bind, watch: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{})}
	go e.run()
	return e
}

func (e *earlyBind) run() {
	defer e.watch.Close()
	pid, ok := e.waitPid()
	if !ok {
		return
	}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.started = true
	e.mu.Unlock()
	e.pid, e.err = pid, e.bind(pid)
	close(e.done)
}

// waitPid reads inotify events until the pid file is moved (or written)
// into the bundle and reads it; false when the watch was closed or failed.
func (e *earlyBind) waitPid() (int, bool) {
	buf := make([]byte, 4096)
	for {
		n, err := e.watch.Read(buf)
		if err != nil {
			return 0, false // closed by stop, or broken
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:end], "\x00"))
			off = end
			if name != initPidFile {
				continue
			}
			if pid, err := readInitPid(filepath.Join(e.bundle, initPidFile)); err == nil {
				return pid, true
			}
		}
	}
}

// readInitPid reads a pid file (bounded, no symlink followed).
func readInitPid(path string) (int, error) {
	b, err := fsafe.ReadFile(path, 32)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: %q is not a pid", path, b)
	}
	return pid, nil
}

// errNotEarly: the early bind did not run; bind after the inner Create.
var errNotEarly = errors.New("not bound early")

// stop ends the watch and reports the early bind's outcome: the pid it
// bound and its error once it ran, or errNotEarly when it had not
// started (it never will).
func (e *earlyBind) stop() (pid int, err error) {
	if e == nil {
		return 0, errNotEarly
	}
	e.mu.Lock()
	started := e.started
	e.stopped = true
	e.mu.Unlock()
	if !started {
		// Ends run's read (at once: the runtime wakes it before the
		// close). Not on the caller's path: closing an inotify
		// instance waits for an SRCU grace period, about 10 ms, before
		// a bind after the inner Create or a failed Create's answer.
		go e.watch.Close()
		return 0, errNotEarly
	}
	<-e.done
	return e.pid, e.err
}
