package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Proc is a process beyond pid reuse: its pid and its start time (field 22
// of /proc/<pid>/stat, clock ticks since boot). Two processes never share
// both while either is alive.
type Proc struct {
	PID   int
	Start uint64
}

func (p Proc) String() string { return fmt.Sprintf("pid %d (start %d)", p.PID, p.Start) }

// Self is the calling process as a Proc.
func Self() (Proc, error) {
	pid := os.Getpid()
	st, err := ReadStat(pid)
	if err != nil {
		return Proc{}, err
	}
	return Proc{PID: pid, Start: st.Start}, nil
}

// Alive reports whether p still runs: its pid names a process with its
// start time. A pid reused by another process is not p.
func (p Proc) Alive() bool {
	st, err := ReadStat(p.PID)
	return err == nil && st.Start == p.Start
}

// Stat is what the boundary reads from /proc/<pid>/stat.
type Stat struct {
	Start uint64 // field 22
	PPID  int    // field 4
	State byte   // field 3: R, S, D, Z (zombie), X (dead), ...
}

// ErrGone means the process exited (or its pid now names another process).
var ErrGone = errors.New("process gone")

// ReadStat reads /proc/<pid>/stat. A process that has exited gives an
// error matching ErrGone.
func ReadStat(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("stat of pid %d: not a process id", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrGone, err)
		}
		return Stat{}, fmt.Errorf("stat of pid %d: %w", pid, err)
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("stat of pid %d: %w", pid, err)
	}
	return st, nil
}

// ParseStat reads the parent pid and start time from a /proc/<pid>/stat
// line. The comm field (2) may hold spaces and parentheses, so fields are
// counted after its last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("malformed stat: no comm field")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("malformed stat: %d fields after comm, want at least 20", len(f))
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil || ppid < 0 {
		return Stat{}, fmt.Errorf("malformed stat: ppid %q", f[1])
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("malformed stat: start time %q", f[19])
	}
	if len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("malformed stat: state %q", f[0])
	}
	return Stat{Start: start, PPID: ppid, State: f[0][0]}, nil
}

// Procs lists the processes of cgroup path p and every descendant cgroup
// (cgroup.procs of each), in no particular order.
func (h Hierarchy) Procs(p string) ([]int, error) {
	dir, err := h.Dir(p)
	if err != nil {
		return nil, err
	}
	pids, err := subtreePids(dir)
	if err != nil {
		return nil, fmt.Errorf("list processes of cgroup %s: %w", p, err)
	}
	return pids, nil
}
