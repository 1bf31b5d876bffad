package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrLandlockUnavailable: the kernel has no Landlock (not built, not in the
// LSM list, or disabled). Restrict then applies nothing and lists every
// asked-for right in Applied.Missing; whether to run anyway is the caller's
// decision.
var ErrLandlockUnavailable = errors.New("landlock is not available on this kernel")

// LandlockABI is the running kernel's Landlock ABI version, 0 when Landlock
// is unavailable.
func LandlockABI() int {
	v, _, errno := unix.RawSyscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Landlock is what a host run may touch. Filesystem access is always handled:
// the zero Landlock denies every filesystem access but stat and path walks,
// which Landlock never restricts. Rules follow symlinks when they are made
// (the paths are the operator's, not the command's); what the command opens
// later is checked against the file it reaches.
type Landlock struct {
	// ReadOnly trees (or files) may be read and executed: read_file,
	// read_dir, execute. A path that does not exist gets no rule and is
	// listed in Applied.Skipped: its absence only narrows.
	ReadOnly []string
	// Writable directory trees allow everything but device nodes and device
	// ioctls: read, execute, write, truncate, create and remove files,
	// directories, symlinks, sockets and fifos, and rename or link within or
	// between Writable trees (refer). Each must be an existing directory.
	Writable []string
	// WritableFiles are single non-directories that may be read, written,
	// truncated and, as the only paths, sent device ioctls (ioctl_dev): e.g.
	// /dev/null, /dev/tty. A missing one is skipped like ReadOnly's.
	WritableFiles []string
	// ConnectTCP nil leaves TCP connect unhandled; non-nil (even empty)
	// allows connect(2) only to these ports. Landlock does not handle UDP.
	ConnectTCP []uint16
	// NoBindTCP handles TCP bind and allows none.
	NoBindTCP bool
	// ScopeAbstractUnix refuses connecting or sending to abstract unix
	// sockets created outside the domain; ScopeSignal refuses signals to
	// processes outside it.
	ScopeAbstractUnix, ScopeSignal bool
}

// Applied is what a Restrict enforces, for the run's manifest. FS, Net and
// Scoped name the handled rights and scopes (Landlock's constant names in
// lower case, e.g. "write_file", "connect_tcp", "signal"): anything handled
// is denied except where a rule grants it. Missing lists what was asked for
// that this ABI cannot enforce, one sentence each; it is never in FS, Net or
// Scoped. Skipped lists ReadOnly and WritableFiles paths that did not exist.
//
// refer is not Missing at ABI 1: that ABI denies every rename or link across
// directories outright, which is narrower than asked.
type Applied struct {
	ABI     int
	FS      []string
	Net     []string
	Scoped  []string
	Missing []string
	Skipped []string
}

// plan is a Restrict with no side effects: what abi handles of l.
type plan struct {
	attr    rulesetAttr
	applied Applied
}

func (l Landlock) plan(abi int) plan {
	var p plan
	p.applied.ABI = abi
	missing := func(r right) {
		p.applied.Missing = append(p.applied.Missing,
			fmt.Sprintf("%s: needs Landlock ABI %d, this kernel has %d", r.name, r.abi, abi))
	}
	for _, r := range fsRights {
		switch {
		case r.abi <= abi:
			p.attr.handledFS |= r.bit
			p.applied.FS = append(p.applied.FS, r.name)
		case r.bit == unix.LANDLOCK_ACCESS_FS_REFER && abi >= 1:
		default:
			missing(r)
		}
	}
	netRight := func(asked bool, r right) {
		switch {
		case !asked:
		case r.abi <= abi:
			p.attr.handledNet |= r.bit
			p.applied.Net = append(p.applied.Net, r.name)
		default:
			missing(r)
		}
	}
	netRight(l.NoBindTCP, netBindTCP)
	netRight(l.ConnectTCP != nil, netConnectTCP)
	scope := func(asked bool, r right) {
		switch {
		case !asked:
		case r.abi <= abi:
			p.attr.scoped |= r.bit
			p.applied.Scoped = append(p.applied.Scoped, r.name)
		default:
			missing(r)
		}
	}
	scope(l.ScopeAbstractUnix, scopeAbstract)
	scope(l.ScopeSignal, scopeSignal)
	return p
}

// Restrict puts the calling thread in a new Landlock domain made of l
// (landlock_restrict_self); what it execs stays in it. The caller has locked
// its OS thread, else the domain lands on whichever thread ran this, and has
// set no_new_privs. Files opened before Restrict keep the access they were
// opened with (inherited stdio works).
//
// At ABI 0 it returns ErrLandlockUnavailable with every asked-for right in
// Missing. Any other failure applies nothing.
func (l Landlock) Restrict() (Applied, error) {
	abi := LandlockABI()
	p := l.plan(abi)
	if abi == 0 {
		return p.applied, ErrLandlockUnavailable
	}
	fd, _, errno := unix.RawSyscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&p.attr)), unsafe.Sizeof(p.attr), 0)
	if errno != 0 {
		return p.applied, fmt.Errorf("create landlock ruleset (ABI %d): %w", abi, errno)
	}
	defer unix.Close(int(fd))

	rules := []struct {
		paths []string
		want  uint64
		kind  pathKind
	}{
		{l.ReadOnly, readRights, anyFile},
		{l.Writable, writeTreeRights, dirOnly},
		{l.WritableFiles, writeFileRights, nonDirOnly},
	}
	for _, r := range rules {
		for _, path := range r.paths {
			skipped, err := addPathRule(int(fd), path, r.want&p.attr.handledFS, r.kind)
			if err != nil {
				return p.applied, err
			}
			if skipped {
				p.applied.Skipped = append(p.applied.Skipped, path)
			}
		}
	}
	if p.attr.handledNet&unix.LANDLOCK_ACCESS_NET_CONNECT_TCP != 0 {
		for _, port := range slices.Compact(slices.Sorted(slices.Values(l.ConnectTCP))) {
			attr := netPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
			if _, _, errno := unix.RawSyscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, ruleNetPort,
				uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
				return p.applied, fmt.Errorf("add landlock rule: connect to TCP port %d: %w", port, errno)
			}
		}
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		if errno == unix.EPERM {
			return p.applied, fmt.Errorf("enforce landlock ruleset: %w (set no_new_privs on this thread first: prctl PR_SET_NO_NEW_PRIVS)", errno)
		}
		return p.applied, fmt.Errorf("enforce landlock ruleset: %w", errno)
	}
	return p.applied, nil
}

type pathKind int

const (
	anyFile pathKind = iota
	dirOnly
	nonDirOnly
)

// addPathRule grants want beneath path, narrowed to what its file type can
// carry. skipped: an optional path (not dirOnly) does not exist.
func addPathRule(rulesetFd int, path string, want uint64, kind pathKind) (skipped bool, err error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) && kind != dirOnly {
			return true, nil
		}
		return false, fmt.Errorf("open landlock rule path %s: %w; create it or remove it from the sandbox's paths", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("stat landlock rule path %s: %w", path, err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case kind == dirOnly && !isDir:
		return false, fmt.Errorf("landlock writable tree %s is not a directory; list a single file under WritableFiles", path)
	case kind == nonDirOnly && isDir:
		return false, fmt.Errorf("landlock writable file %s is a directory; list a directory tree under Writable", path)
	case !isDir:
		want &= fileRights
	}
	if want == 0 {
		return false, nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: want, Parent_fd: int32(fd)}
	if _, _, errno := unix.RawSyscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFd), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return false, fmt.Errorf("add landlock rule for %s (access %s): %w", path, accessNames(want), errno)
	}
	return false, nil
}

// accessNames renders a filesystem access mask for an error.
func accessNames(mask uint64) string {
	var names []string
	for _, r := range fsRights {
		if mask&r.bit != 0 {
			names = append(names, r.name)
		}
	}
	return strings.Join(names, ",") + " (0x" + strconv.FormatUint(mask, 16) + ")"
}
