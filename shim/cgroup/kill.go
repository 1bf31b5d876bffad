package cgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// MaxKillTree bounds how many processes KillTrees stops and kills: past it
// the rest of a tree is reported, not walked (a fork bomb outside every
// pids limit must not keep the exit path busy forever).
const MaxKillTree = 4096

// Killed is the fate of one process KillTrees was asked to end, or found
// below one.
type Killed struct {
	Proc
	Parent int    // 0 for a process asked for; else the pid it was found under
	Cgroup string // its cgroup v2 path when it was stopped, "" if unread
	// Killed is true when the SIGKILL was delivered and the process exited
	// before ctx ended.
	Killed bool
	Err    error // why not: ErrGone when it had exited already
}

// KillTrees ends processes that live outside any cgroup the caller can
// kill as a whole (escaped from the container's cgroup). Each is opened as
// a pidfd and its start time re-read after the open, so a pid that now
// names another process is never signalled; it is stopped (SIGSTOP: it
// cannot fork any more), then its descendants are found the same way and
// stopped, then all of them get SIGKILL through their pidfds and are
// waited for until ctx ends (DefaultDrainTimeout without a deadline). The
// result lists procs first, then the descendants found, in walk order.
func KillTrees(ctx context.Context, procs []Proc) []Killed {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDrainTimeout)
		defer cancel()
	}
	var out []Killed
	var fds []int // fds[i] is out[i]'s pidfd, -1 when none
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	seen := map[int]bool{}
	add := func(p Proc, parent int) {
		seen[p.PID] = true
		k := Killed{Proc: p, Parent: parent}
		fd, err := openVerified(p, parent)
		if err == nil {
			if err = unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0); err != nil {
				unix.Close(fd)
				fd = -1
				err = signalErr("stop", p, err)
			}
		}
		k.Err = err
		if err == nil {
			k.Cgroup, _ = PathOf(p.PID)
		}
		out, fds = append(out, k), append(fds, fd)
	}
	for _, p := range procs {
		if !seen[p.PID] && len(out) < MaxKillTree {
			add(p, 0)
		}
	}
	// Walk below every stopped process; out grows as children are found.
	for i := 0; i < len(out) && len(out) < MaxKillTree; i++ {
		if fds[i] < 0 {
			continue
		}
		kids, err := children(out[i].PID)
		if err != nil {
			continue // exited meanwhile: its children were reparented, see the doc
		}
		for _, kid := range kids {
			if seen[kid] || len(out) >= MaxKillTree {
				continue
			}
			st, err := ReadStat(kid)
			if err != nil {
				continue
			}
			add(Proc{PID: kid, Start: st.Start}, out[i].PID)
		}
	}
	for i, fd := range fds {
		if fd < 0 {
			continue
		}
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
			out[i].Err = signalErr("kill", out[i].Proc, err)
			unix.Close(fd)
			fds[i] = -1
		}
	}
	waitExited(ctx, out, fds)
	return out
}

// openVerified opens pid p as a pidfd and checks, after the open, that it
// still is process p (and, for a descendant, still a child of parent). A
// pidfd names one process forever: if the pid was reused before the open,
// the re-read start time differs and nothing is signalled.
func openVerified(p Proc, parent int) (int, error) { return openVerifiedFlags(p, parent, 0) }

// openVerifiedFlags is openVerified with pidfd_open flags.
func openVerifiedFlags(p Proc, parent, flags int) (int, error) {
	fd, err := unix.PidfdOpen(p.PID, flags)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return -1, fmt.Errorf("open %s: %w", p, ErrGone)
		}
		return -1, fmt.Errorf("open pidfd of %s: %w", p, err)
	}
	st, err := ReadStat(p.PID)
	switch {
	case err != nil:
	case st.Start != p.Start:
		err = fmt.Errorf("%s: %w (the pid now names a process started at %d)", p, ErrGone, st.Start)
	case parent != 0 && st.PPID != parent:
		err = fmt.Errorf("%s: %w (no longer a child of %d)", p, ErrGone, parent)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func signalErr(verb string, p Proc, err error) error {
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%s %s: %w", verb, p, ErrGone)
	}
	return fmt.Errorf("%s %s: %w", verb, p, err)
}

// waitExited polls the pidfds (readable once the process exited) until
// all are or ctx ends, marking out[i].Killed.
func waitExited(ctx context.Context, out []Killed, fds []int) {
	for {
		var pfds []unix.PollFd
		var idx []int
		for i, fd := range fds {
			if fd >= 0 && !out[i].Killed {
				pfds = append(pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
				idx = append(idx, i)
			}
		}
		if len(pfds) == 0 {
			return
		}
		wait := 50 * time.Millisecond
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			wait = max(time.Until(d), 0)
		}
		n, err := unix.Poll(pfds, int(wait.Milliseconds()))
		if err != nil && !errors.Is(err, unix.EINTR) {
			for _, i := range idx {
				out[i].Err = fmt.Errorf("wait for %s: %w", out[i].Proc, err)
			}
			return
		}
		for j := 0; n > 0 && j < len(pfds); j++ {
			if pfds[j].Revents != 0 {
				out[idx[j]].Killed = true
			}
		}
		if ctx.Err() != nil {
			for _, i := range idx {
				if !out[i].Killed {
					out[i].Err = fmt.Errorf("%s did not exit after SIGKILL: %w", out[i].Proc, ctx.Err())
				}
			}
			return
		}
	}
}

// children lists pid's children: /proc/<pid>/task/<tid>/children of every
// thread (a child belongs to the thread that forked it). Kernels without
// CONFIG_PROC_CHILDREN lack the file; then every /proc/<n>/stat is read for
// its parent pid.
func children(pid int) ([]int, error) {
	base := "/proc/" + strconv.Itoa(pid) + "/task"
	d, err := os.Open(base)
	if err != nil {
		return nil, err
	}
	tids, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, tid := range tids {
		b, err := os.ReadFile(base + "/" + tid + "/children")
		if errors.Is(err, os.ErrNotExist) && tid == strconv.Itoa(pid) {
			return childrenByScan(pid)
		}
		if err != nil {
			continue // the thread exited
		}
		for _, f := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(f)); err == nil && n > 0 {
				kids = append(kids, n)
			}
		}
	}
	return kids, nil
}

func childrenByScan(pid int) ([]int, error) {
	pids, err := ListPIDs()
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, n := range pids {
		if st, err := ReadStat(n); err == nil && st.PPID == pid {
			kids = append(kids, n)
		}
	}
	return kids, nil
}

// ListPIDs lists the process ids in /proc (the caller's pid namespace),
// reading directory names only.
func ListPIDs() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	pids := make([]int, 0, len(names))
	for _, s := range names {
		if s == "" || s[0] < '1' || s[0] > '9' {
			continue
		}
		if n, err := strconv.Atoi(s); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}
