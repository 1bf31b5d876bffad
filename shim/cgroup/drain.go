package cgroup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDrainTimeout bounds Drain when ctx has no deadline.
const DefaultDrainTimeout = 10 * time.Second

// ErrStillPopulated means processes remained in the cgroup after Drain's
// bound.
var ErrStillPopulated = errors.New("cgroup still populated")

// Populated reports whether cgroup path p or any descendant has a live
// process ("populated 1" in cgroup.events).
func (h Hierarchy) Populated(p string) (bool, error) {
	dir, err := h.Dir(p)
	if err != nil {
		return false, err
	}
	return populated(dir)
}

func populated(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false, fmt.Errorf("read cgroup.events: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return v == "1", nil
		}
	}
	return false, fmt.Errorf("read cgroup.events in %s: no populated key", dir)
}

// Drain kills every process in cgroup path p and its descendants and waits
// until the cgroup is empty. killed is the number of processes seen when the
// drain began. It writes cgroup.kill (Linux 5.14+); without it, it freezes the
// subtree, SIGKILLs each process and thaws. It waits until ctx is done or,
// without a deadline, DefaultDrainTimeout.
func (h Hierarchy) Drain(ctx context.Context, p string) (killed int, err error) {
	dir, err := h.Dir(p)
	if err != nil {
		return 0, err
	}
	return drain(ctx, dir, true)
}

func drain(ctx context.Context, dir string, useKillFile bool) (killed int, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDrainTimeout)
		defer cancel()
	}
	pids, err := subtreePids(dir)
	if err != nil {
		return 0, fmt.Errorf("drain %s: %w", dir, err)
	}
	killed = len(pids)
	if killed == 0 {
		if pop, err := populated(dir); err != nil || !pop {
			return 0, err
		}
	}
	kill := killWithFreeze
	if useKillFile {
		kill = func(ctx context.Context, dir string) error {
			err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
			if errors.Is(err, fs.ErrNotExist) {
				return killWithFreeze(ctx, dir)
			}
			return err
		}
	}
	if err := kill(ctx, dir); err != nil {
		return killed, fmt.Errorf("drain %s: %w", dir, err)
	}
	if err := waitEmpty(ctx, dir); err != nil {
		return killed, fmt.Errorf("drain %s: %w", dir, err)
	}
	return killed, nil
}

// killWithFreeze freezes the subtree so nothing forks while we kill, SIGKILLs
// every process (a frozen task still dies of SIGKILL), then thaws.
func killWithFreeze(ctx context.Context, dir string) (retErr error) {
	freeze := filepath.Join(dir, "cgroup.freeze")
	if err := os.WriteFile(freeze, []byte("1"), 0); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	defer func() {
		if err := os.WriteFile(freeze, []byte("0"), 0); err != nil && retErr == nil {
			retErr = fmt.Errorf("thaw: %w", err)
		}
	}()
	// Give the freeze a short while; if it does not settle, kill anyway:
	// the loop below repeats until nothing is left or ctx ends.
	fctx, cancel := context.WithTimeout(ctx, time.Second)
	_ = waitEvent(fctx, dir, "frozen 1")
	cancel()
	for {
		pids, err := subtreePids(dir)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("kill %d: %w", pid, err)
			}
		}
		if pop, err := populated(dir); err != nil || !pop {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after SIGKILL: %w", ErrStillPopulated, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitEmpty polls cgroup.events until "populated 0".
func waitEmpty(ctx context.Context, dir string) error {
	if err := waitEvent(ctx, dir, "populated 0"); err != nil {
		n, _ := subtreePids(dir)
		return fmt.Errorf("%w (%d processes left): %w", ErrStillPopulated, len(n), err)
	}
	return nil
}

// waitEvent waits until cgroup.events in dir holds the line want. The
// kernel reports each change of the file as a modification (inotify
// IN_MODIFY: what poll(2) sees as POLLPRI), so the wait ends when the
// change happens, not at the next of a backing-off series of reads; it
// reads the file again at least every 20 ms all the same, and only on that
// series where no watch can be set.
func waitEvent(ctx context.Context, dir, want string) error {
	path := filepath.Join(dir, "cgroup.events")
	// Watched before the first read: a change between the read and the
	// wait is not missed.
	w := watchModified(path)
	if w != nil {
		defer w.Close()
	}
	delay := time.Millisecond
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read cgroup.events: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line == want {
				return nil
			}
		}
		if err := waitModified(ctx, w, delay); err != nil {
			return fmt.Errorf("wait for %q in cgroup.events: %w", want, err)
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// watchModified is an inotify watch for modifications of the file at
// path, non-blocking (read through the runtime's poller); nil when the
// watch cannot be set.
func watchModified(path string) *os.File {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "inotify:"+path)
}

// waitModified returns once w reports a modification, d has passed or ctx
// is done (its error then); without w, once d has passed or ctx is done.
func waitModified(ctx context.Context, w *os.File, d time.Duration) error {
	if w == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	deadline := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := w.SetReadDeadline(deadline); err != nil {
		return nil // read the file again at once
	}
	var buf [4096]byte
	if _, err := w.Read(buf[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		// A broken watch: the caller reads the file again, at most d
		// later each time.
		time.Sleep(d)
	}
	return ctx.Err()
}

// subtreePids lists the processes of dir and every descendant cgroup.
// cgroup.procs lists only a cgroup's own members, so walk the subtree.
func subtreePids(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != dir {
				return nil // a child cgroup went away under us
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) && p != dir {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read cgroup.procs: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
			if err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// Populated reports whether cgroup path p has a live process.
func Populated(p string) (bool, error) {
	h, err := Find()
	if err != nil {
		return false, err
	}
	return h.Populated(p)
}

// Drain kills every process in cgroup path p and waits until it is empty.
func Drain(ctx context.Context, p string) (killed int, err error) {
	h, err := Find()
	if err != nil {
		return 0, err
	}
	return h.Drain(ctx, p)
}
