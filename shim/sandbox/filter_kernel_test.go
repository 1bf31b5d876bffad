package sandbox

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sys is a raw syscall; a returned fd is closed.
func sys(nr uintptr, args ...uintptr) error {
	var a [6]uintptr
	copy(a[:], args)
	r, _, errno := unix.RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if errno != 0 {
		return errno
	}
	if fdReturning[nr] {
		unix.Close(int(r))
	}
	return nil
}

var fdReturning = map[uintptr]bool{unix.SYS_SOCKET: true}

// onPty runs an ioctl on a fresh pty master.
func onPty(cmd uintptr) func() error {
	return func() error {
		fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var buf [64]byte
		return sys(unix.SYS_IOCTL, uintptr(fd), cmd, uintptr(unsafe.Pointer(&buf[0])))
	}
}

// seccompProbes call each refused syscall with arguments the kernel itself
// would refuse (so a control run changes nothing), and some allowed ones.
func seccompProbes() map[string]func() error {
	const high = 1 << 32
	return map[string]func() error{
		"socket_unix":        func() error { return sys(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0) },
		"socket_inet":        func() error { return sys(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0) },
		"socket_packet":      func() error { return sys(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) },
		"socket_packet_high": func() error { return sys(unix.SYS_SOCKET, high|unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) },
		"socket_alg":         func() error { return sys(unix.SYS_SOCKET, unix.AF_ALG, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0) },
		"socket_vsock":       func() error { return sys(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0) },
		"socket_netlink_route": func() error {
			return sys(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		},
		"socket_netlink_usersock": func() error {
			return sys(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_USERSOCK)
		},
		"socket_netlink_usersock_hi": func() error {
			return sys(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, high|unix.NETLINK_USERSOCK)
		},
		"socket_netlink_netfilter": func() error {
			return sys(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		},
		"socket_netlink_netfilter_hi": func() error {
			return sys(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, high|unix.NETLINK_NETFILTER)
		},
		"join_ip":                       setsockopt(unix.AF_INET, unix.SOL_IP, unix.IP_ADD_MEMBERSHIP),
		"join_ip_mcast":                 setsockopt(unix.AF_INET, unix.SOL_IP, unix.MCAST_JOIN_GROUP),
		"join_ip_high":                  setsockopt(unix.AF_INET, high|unix.SOL_IP, high|unix.IP_ADD_MEMBERSHIP),
		"join_ipv6":                     setsockopt(unix.AF_INET6, unix.SOL_IPV6, unix.IPV6_ADD_MEMBERSHIP),
		"join_ipv6_anycast":             setsockopt(unix.AF_INET6, unix.SOL_IPV6, unix.IPV6_JOIN_ANYCAST),
		"setsockopt_ip_tos":             setsockopt(unix.AF_INET, unix.SOL_IP, unix.IP_TOS),
		"socketpair_unix":               socketpair(unix.AF_UNIX),
		"socketpair_inet":               socketpair(unix.AF_INET),
		"clone3":                        func() error { return sys(unix.SYS_CLONE3, 0, 0) },
		"clone_newuser":                 func() error { return sys(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_FS) },
		"unshare_newuser":               func() error { return sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER) },
		"unshare_newuser_high":          func() error { return sys(unix.SYS_UNSHARE, high|unix.CLONE_NEWUSER) },
		"setns":                         func() error { return sys(unix.SYS_SETNS, ^uintptr(0), 0) },
		"io_uring_setup":                func() error { return sys(unix.SYS_IO_URING_SETUP, 0, 0) },
		"io_uring_enter":                func() error { return sys(unix.SYS_IO_URING_ENTER, ^uintptr(0), 0, 0, 0, 0, 0) },
		"keyctl":                        func() error { return sys(unix.SYS_KEYCTL, 0xffff) },
		"bpf":                           func() error { return sys(unix.SYS_BPF, 0xffff, 0, 0) },
		"perf_event_open":               func() error { return sys(unix.SYS_PERF_EVENT_OPEN, 0, 0, 0, ^uintptr(0), 0) },
		"userfaultfd":                   func() error { return sys(unix.SYS_USERFAULTFD, 0xffffffff) },
		"mount":                         mountProbe,
		"open_tree":                     func() error { return sys(unix.SYS_OPEN_TREE, ^uintptr(0), 0, 0xffffffff) },
		"open_by_handle_at":             func() error { return sys(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0) },
		"ioctl_tiocsti":                 onPty(unix.TIOCSTI),
		"ioctl_tiocsti_high":            onPty(high | unix.TIOCSTI),
		"ioctl_tioclinux":               onPty(unix.TIOCLINUX),
		"ioctl_tiocgwinsz":              onPty(unix.TIOCGWINSZ),
		"personality_query":             func() error { return sys(unix.SYS_PERSONALITY, 0xffffffff) },
		"personality_addr_no_randomize": func() error { return sys(unix.SYS_PERSONALITY, 0x0040000) }, // ADDR_NO_RANDOMIZE
		"getpid":                        func() error { return sys(unix.SYS_GETPID) },
	}
}

func socketpair(af uintptr) func() error {
	return func() error {
		var fds [2]int32
		if err := sys(unix.SYS_SOCKETPAIR, af, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0, uintptr(unsafe.Pointer(&fds))); err != nil {
			return err
		}
		unix.Close(int(fds[0]))
		unix.Close(int(fds[1]))
		return nil
	}
}

// setsockopt sets option opt at level on a fresh UDP socket of family af
// with no value (optlen 0), which the kernel refuses (EINVAL) before it
// joins anything.
func setsockopt(af, level, opt uintptr) func() error {
	return func() error {
		fd, err := unix.Socket(int(af), unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return sys(unix.SYS_SETSOCKOPT, uintptr(fd), level, opt, 0, 0)
	}
}

// mountProbe mounts onto a path that does not exist.
func mountProbe() error {
	src, _ := unix.BytePtrFromString("none")
	dst, _ := unix.BytePtrFromString("/nonexistent/gensee-sandbox-test")
	fstype, _ := unix.BytePtrFromString("tmpfs")
	return sys(unix.SYS_MOUNT, uintptr(unsafe.Pointer(src)), uintptr(unsafe.Pointer(dst)), uintptr(unsafe.Pointer(fstype)), 0, 0)
}

// TestHostFilterKernel installs HostFilter in a child and calls what it
// refuses and some of what it allows.
//
// Foreign architectures are not called here: an i386 syscall needs int $0x80
// from assembly, which this package does not carry. TestHostFilterProgram
// checks the program's answer to a foreign AUDIT_ARCH (KILL_PROCESS) and to
// x32 numbers (ENOSYS) instead.
func TestHostFilterKernel(t *testing.T) {
	control := runProbes(t, childConfig{Probes: "seccomp"}).Results
	got := runProbes(t, childConfig{Sandbox: "seccomp", Probes: "seccomp"}).Results
	want := map[string]string{
		"socket_unix":                   "ok",
		"socket_inet":                   "ok",
		"socket_packet":                 "EPERM",
		"socket_packet_high":            "EPERM",
		"socket_alg":                    "EPERM",
		"socket_vsock":                  "EPERM",
		"socket_netlink_route":          "ok",
		"socket_netlink_usersock":       "EPERM",
		"socket_netlink_usersock_hi":    "EPERM",
		"socket_netlink_netfilter":      "EPERM",
		"socket_netlink_netfilter_hi":   "EPERM",
		"join_ip":                       "EPERM",
		"join_ip_mcast":                 "EPERM",
		"join_ip_high":                  "EPERM",
		"join_ipv6":                     "EPERM",
		"join_ipv6_anycast":             "EPERM",
		"setsockopt_ip_tos":             "ok",
		"socketpair_unix":               "ok",
		"socketpair_inet":               "EPERM",
		"clone3":                        "ENOSYS",
		"clone_newuser":                 "EPERM",
		"unshare_newuser":               "EPERM",
		"unshare_newuser_high":          "EPERM",
		"setns":                         "EPERM",
		"io_uring_setup":                "EPERM",
		"io_uring_enter":                "EPERM",
		"keyctl":                        "EPERM",
		"bpf":                           "EPERM",
		"perf_event_open":               "EPERM",
		"userfaultfd":                   "EPERM",
		"mount":                         "EPERM",
		"open_tree":                     "EPERM",
		"open_by_handle_at":             "EPERM",
		"ioctl_tiocsti":                 "EPERM",
		"ioctl_tiocsti_high":            "EPERM",
		"ioctl_tioclinux":               "EPERM",
		"ioctl_tiocgwinsz":              "ok",
		"personality_query":             "ok",
		"personality_addr_no_randomize": "EPERM",
		"getpid":                        "ok",
	}
	check(t, got, control, want)
	// The allowed probes must not depend on the filter.
	for name, w := range want {
		if w == "ok" && control[name] != "ok" {
			t.Errorf("probe %s fails without the filter: %s", name, control[name])
		}
	}
}
