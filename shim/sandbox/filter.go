package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/sockrule"
)

// hostRefused get EPERM whatever their arguments, on top of sockrule's
// list. No capability is held after the wrapper drops credentials, so most
// of these fail anyway; refusing them here takes their code out of reach
// (keyrings, BPF, perf, userfaultfd, the old and new mount APIs, modules,
// kexec, handle-based opens) and keeps setns from joining a namespace
// through an inherited fd. name_to_handle_at stays allowed: it only names
// a file the caller can already stat.
var hostRefused = []string{
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "open_tree_attr",
	"fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
	"open_by_handle_at", "setns",
}

// personalities are the personality(2) arguments allowed, as in moby's
// default seccomp profile: PER_LINUX, PER_LINUX32, UNAME26, both, and the
// query 0xffffffff. Flags such as ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC
// weaken the command's own hardening and get EPERM.
var personalities = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// refusedIoctls are the terminal ioctls that push input into, or drive the
// console of, a tty the command holds open: TIOCSTI types into the caller's
// shell (dev.tty.legacy_tiocsti is 1 here), TIOCLINUX can paste the console
// selection.
var refusedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// multicastJoins are the setsockopt(2) options, by level, that make the
// kernel join a group for the socket (or, IPV6_JOIN_ANYCAST, the anycast
// address's solicited-node group): the kernel then sends IGMP or MLD
// reports itself, from no socket of the run's cgroup, which the table cannot
// attribute to the run (a few bytes to the local network per join). Leaves,
// source filters and IP_MSFILTER act only on a group already joined.
var multicastJoins = []struct {
	level uint32
	name  string
	opts  []uint32
}{
	{unix.SOL_IP, "SOL_IP", []uint32{unix.IP_ADD_MEMBERSHIP, unix.IP_ADD_SOURCE_MEMBERSHIP, unix.MCAST_JOIN_GROUP, unix.MCAST_JOIN_SOURCE_GROUP}},
	{unix.SOL_IPV6, "SOL_IPV6", []uint32{unix.IPV6_ADD_MEMBERSHIP, unix.IPV6_JOIN_ANYCAST, unix.MCAST_JOIN_GROUP, unix.MCAST_JOIN_SOURCE_GROUP}},
}

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// HostFilter is the host run's seccomp program, as the kernel takes it
// (struct sock_filter). Default action ALLOW; FilterSummary says in words
// what it refuses. Arguments are compared on their low 32 bits, the C int or
// unsigned int the kernel reads: socket(0x100000011, ...) is AF_PACKET and
// is refused as such.
//
// It fails only when the program cannot be built for this architecture, or
// sockrule refuses a syscall this table cannot number.
func HostFilter() ([]unix.SockFilter, error) {
	if nativeArch == 0 {
		return nil, errors.New("build host seccomp filter: architecture not supported (amd64 and arm64 are)")
	}
	refused, err := refusedNumbers()
	if err != nil {
		return nil, err
	}
	allowed := sockrule.AllowedSocketFamilies()

	a := newAsm()
	a.load(offArch)
	a.jeq(nativeArch, "", "kill")
	a.load(offNr)
	if x32Bit != 0 {
		a.jset(x32Bit, "enosys", "")
	}
	a.jeq(unix.SYS_CLONE3, "enosys", "")
	for _, nr := range refused {
		a.jeq(nr, "eperm", "")
	}
	a.jeq(unix.SYS_SOCKET, "socket", "")
	a.jeq(unix.SYS_SOCKETPAIR, "socketpair", "")
	a.jeq(unix.SYS_UNSHARE, "newuser", "")
	a.jeq(unix.SYS_CLONE, "newuser", "")
	a.jeq(unix.SYS_IOCTL, "ioctl", "")
	a.jeq(unix.SYS_SETSOCKOPT, "setsockopt", "")
	a.jeq(unix.SYS_PERSONALITY, "personality", "allow")

	// socket(family, type, protocol): the allowlist, then AF_NETLINK's protocol.
	a.label("socket")
	a.load(argLow(0))
	for _, af := range allowed {
		if af == sockrule.AFNetlink {
			a.jeq(uint32(af), "netlink", "")
		} else {
			a.jeq(uint32(af), "allow", "")
		}
	}
	a.ret(retEPERM)
	a.label("netlink")
	a.load(argLow(2))
	for _, p := range sockrule.AllowedNetlinkProtocols() {
		a.jeq(uint32(p), "allow", "")
	}
	a.ret(retEPERM)

	// socketpair(2) makes connected pairs of AF_UNIX (and AF_TIPC) only.
	a.label("socketpair")
	a.load(argLow(0))
	a.jeq(unix.AF_UNIX, "allow", "eperm")

	// unshare(flags) and clone(flags, ...): flags are arg0 on amd64 and arm64.
	a.label("newuser")
	a.load(argLow(0))
	a.jset(unix.CLONE_NEWUSER, "eperm", "allow")

	a.label("ioctl")
	a.load(argLow(1))
	for _, cmd := range refusedIoctls {
		a.jeq(cmd, "eperm", "")
	}
	a.ret(retAllow)

	// setsockopt(fd, level, optname, ...): the multicast joins.
	a.label("setsockopt")
	a.load(argLow(1))
	for _, l := range multicastJoins {
		a.jeq(l.level, l.name, "")
	}
	a.ret(retAllow)
	for _, l := range multicastJoins {
		a.label(l.name)
		a.load(argLow(2))
		for _, o := range l.opts {
			a.jeq(o, "eperm", "")
		}
		a.ret(retAllow)
	}

	a.label("personality")
	a.load(argLow(0))
	for _, p := range personalities {
		a.jeq(p, "allow", "")
	}
	a.ret(retEPERM)

	a.label("allow")
	a.ret(retAllow)
	a.label("eperm")
	a.ret(retEPERM)
	a.label("enosys")
	a.ret(retENOSYS)
	a.label("kill")
	a.ret(retKill)
	return a.assemble()
}

// refusedNumbers numbers sockrule's refused syscalls and hostRefused.
func refusedNumbers() ([]uint32, error) {
	var out []uint32
	for _, name := range append(sockrule.RefusedSyscalls(), hostRefused...) {
		nr, ok := sysnum[name]
		switch {
		case ok:
			out = append(out, nr)
		case slices.Contains(compatOnly, name):
		default:
			return nil, fmt.Errorf("build host seccomp filter: no syscall number for refused syscall %q; add it to sysnum", name)
		}
	}
	return out, nil
}

// FilterSummary says, for the run's manifest, what HostFilter refuses.
func FilterSummary() []string {
	var fams []string
	for _, af := range sockrule.AllowedSocketFamilies() {
		fams = append(fams, sockrule.SocketFamilyName(af))
	}
	var protos []string
	for _, p := range sockrule.AllowedNetlinkProtocols() {
		protos = append(protos, sockrule.NetlinkProtocolName(p))
	}
	var refused []string
	for _, name := range append(sockrule.RefusedSyscalls(), hostRefused...) {
		if !slices.Contains(compatOnly, name) {
			refused = append(refused, name)
		}
	}
	arch := "syscalls of any ABI but " + archName + " (process killed)"
	if x32Bit != 0 {
		arch = "syscalls of any ABI but x86_64 (i386 kills the process, x32 gets ENOSYS)"
	}
	return []string{
		arch,
		"socket families other than " + strings.Join(fams, ", ") + " (EPERM, family compared on its low 32 bits)",
		"AF_NETLINK sockets of any protocol but " + strings.Join(protos, ", ") + " (EPERM, protocol compared on its low 32 bits: so NETLINK_USERSOCK, which reaches other processes' sockets, and NETLINK_NETFILTER)",
		"socketpair of any family but AF_UNIX (EPERM)",
		"unshare and clone with CLONE_NEWUSER (EPERM)",
		"clone3 (ENOSYS: libc falls back to clone, so CLONE_INTO_CGROUP cannot be used)",
		"ioctl TIOCSTI and TIOCLINUX (EPERM)",
		"setsockopt joining a multicast group or an IPv6 anycast address: IP_ADD_MEMBERSHIP, IP_ADD_SOURCE_MEMBERSHIP, MCAST_JOIN_GROUP, MCAST_JOIN_SOURCE_GROUP at SOL_IP; IPV6_ADD_MEMBERSHIP, IPV6_JOIN_ANYCAST, MCAST_JOIN_GROUP, MCAST_JOIN_SOURCE_GROUP at SOL_IPV6 (EPERM: the kernel's IGMP and MLD reports leave from no socket of the run's cgroup)",
		"personality other than PER_LINUX, PER_LINUX32, UNAME26 or the query (EPERM)",
		strings.Join(refused, ", ") + " (EPERM)",
	}
}

// InstallFilter installs prog on the calling thread only (seccomp(2)
// SECCOMP_SET_MODE_FILTER without TSYNC); threads and processes it creates
// afterwards inherit it. The caller has locked its OS thread and set
// no_new_privs (else the kernel refuses with EACCES unless the thread holds
// CAP_SYS_ADMIN).
func InstallFilter(prog []unix.SockFilter) error {
	if len(prog) == 0 {
		return errors.New("install seccomp filter: empty program")
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if errno == unix.EACCES {
		return fmt.Errorf("install seccomp filter: %w (set no_new_privs on this thread first: prctl PR_SET_NO_NEW_PRIVS)", errno)
	}
	if errno != 0 {
		return fmt.Errorf("install seccomp filter: %w", errno)
	}
	return nil
}
