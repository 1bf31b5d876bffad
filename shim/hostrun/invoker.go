package hostrun

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The invoking user of a host run comes from the kernel, never from the
// environment (SUDO_UID, SUDO_GID, USER, doas' or a CI agent's variables
// are ignored: whoever can set the environment could name any account):
//
//  1. A real uid other than 0 is the invoking user (Run refuses it: the
//     boundary needs root).
//  2. Otherwise (real uid 0) the ancestors are walked from this process up
//     (/proc/<pid>/stat for the parent and start time, /proc/<pid>/status
//     for the real uid, the stat read again after the status so a pid
//     reused between the reads is seen; a parent must be no younger than
//     its child, else the pid was reused): the first ancestor whose real
//     uid is not 0 is the account that elevated. sudo keeps the caller's
//     real uid in its own process (and in the monitor it forks under
//     use_pty) while it waits for the command; su leaves its caller's
//     shell above it; doas and pkexec exec the command in place, leaving
//     the caller's shell as its parent.
//  3. When every ancestor up to pid 1 (or the top of this pid namespace)
//     has real uid 0, the process's session leader decides: a session
//     that is not our own must still have its leader (no younger than us;
//     a caller who killed their sudo to reparent us to pid 1 killed the
//     leader of a session sudo started, or left us in their own session,
//     whose leader is theirs); its real uid, if not 0, is the invoking
//     user. A leader that is gone is an error: the invoking user cannot be
//     established.
//  4. Else root, unless this process itself was left to pid 1 in a
//     session whose root leader is not an ancestor: that is a caller who
//     su'd from a root shell (which leads the session) and killed their
//     sudo, an error, never root. A root process started in the
//     background whose shell has exited runs its boundary run in a
//     session of its own (setsid). A root subreaper above the caller
//     (a container's init, a root tmux server running su) would adopt
//     this process instead of pid 1: that case is not told apart.
//
// /proc/self/loginuid is not used: a process whose loginuid is unset (every
// service, container and runuser/setpriv child) may set it to any value
// without privilege, and sudo passes it on.
//
// Any /proc read that fails ends the walk with an error, never with root.

// maxAncestors bounds the walk (a pid chain is far shorter; a cycle is a
// kernel bug or a reused pid the start times missed).
const maxAncestors = 4096

// procStat is what the walk needs of /proc/<pid>/stat.
type procStat struct {
	PPID, Session int
	Start         uint64 // clock ticks after boot
}

// procReader is the walk's seam to procfs.
type procReader interface {
	Stat(pid int) (procStat, error)
	RealUID(pid int) (uint32, error)
}

// errNoInvoker: the invoking user cannot be established.
var errNoInvoker = errors.New("cannot establish the invoking user")

// invokingUID applies the rule above to the process self whose real uid is
// realUID.
func invokingUID(p procReader, self, realUID int) (uint32, error) {
	if realUID != 0 {
		return uint32(realUID), nil
	}
	me, err := p.Stat(self)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errNoInvoker, err)
	}
	child := me
	walked := map[int]bool{self: true}
	for range maxAncestors {
		pid := child.PPID
		if pid <= 0 { // the top of this pid namespace
			return sessionUID(p, self, me, walked)
		}
		st, uid, err := stableUID(p, pid)
		if err != nil {
			return 0, err
		}
		if st.Start > child.Start {
			return 0, fmt.Errorf("%w: ancestor %d is younger than its child (pid reused)", errNoInvoker, pid)
		}
		if uid != 0 {
			return uid, nil
		}
		walked[pid] = true
		if pid == 1 {
			return sessionUID(p, self, me, walked)
		}
		child = st
	}
	return 0, fmt.Errorf("%w: more than %d ancestors", errNoInvoker, maxAncestors)
}

// stableUID reads pid's real uid between two reads of its stat that agree.
func stableUID(p procReader, pid int) (procStat, uint32, error) {
	st, err := p.Stat(pid)
	if err != nil {
		return procStat{}, 0, fmt.Errorf("%w: ancestor %d: %w", errNoInvoker, pid, err)
	}
	uid, err := p.RealUID(pid)
	if err != nil {
		return procStat{}, 0, fmt.Errorf("%w: ancestor %d: %w", errNoInvoker, pid, err)
	}
	again, err := p.Stat(pid)
	if err != nil || again != st {
		return procStat{}, 0, fmt.Errorf("%w: ancestor %d changed while read", errNoInvoker, pid)
	}
	return st, uid, nil
}

// sessionUID is steps 3 and 4: every ancestor is root; walked holds this
// process and every ancestor the walk read.
func sessionUID(p procReader, self int, me procStat, walked map[int]bool) (uint32, error) {
	if me.Session == self || me.Session <= 0 { // our own session, or one outside this pid namespace
		return 0, nil
	}
	st, uid, err := stableUID(p, me.Session)
	if err != nil || st.Start > me.Start || st.Session != me.Session {
		return 0, fmt.Errorf("%w: every ancestor is root but the leader of session %d is gone (was the caller's sudo killed?)", errNoInvoker, me.Session)
	}
	if uid == 0 && !walked[me.Session] && me.PPID == 1 {
		return 0, fmt.Errorf("%w: every ancestor is root but the root leader of session %d is not one of them: this process was left to pid 1 (was the caller's sudo killed?)", errNoInvoker, me.Session)
	}
	return uid, nil
}

// procfs reads the real /proc.
type procfs struct{}

func (procfs) Stat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

func (procfs) RealUID(pid int) (uint32, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseStatusUID(b)
}

// parseStat reads ppid (field 4), session (6) and starttime (22) of a
// /proc/<pid>/stat line. The comm field (2) is in parentheses and may hold
// anything, so the fields are counted after its last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("stat: no comm field")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 20 {
		return procStat{}, errors.New("stat: too few fields")
	}
	ppid, err1 := strconv.Atoi(f[1])
	sid, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("stat: %w", err)
	}
	return procStat{PPID: ppid, Session: sid, Start: start}, nil
}

// parseStatusUID is the real uid, the first number of the "Uid:" line.
func parseStatusUID(b []byte) (uint32, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseUint(f[0], 10, 32)
			if err != nil {
				return 0, fmt.Errorf("status: Uid: %w", err)
			}
			return uint32(n), nil
		}
	}
	return 0, errors.New("status: no Uid line")
}
