package sandbox

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/sockrule"
)

// seccompData is struct seccomp_data.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

// run interprets prog the way the kernel's seccomp BPF does, for the few
// instructions HostFilter emits; anything else is an error.
func run(prog []unix.SockFilter, d seccompData) (uint32, error) {
	var buf [64]byte
	binary.LittleEndian.PutUint32(buf[0:], d.nr)
	binary.LittleEndian.PutUint32(buf[4:], d.arch)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(buf[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K%4 != 0 || in.K+4 > uint32(len(buf)) {
				return 0, fmt.Errorf("pc %d: load at %d", pc, in.K)
			}
			acc = binary.LittleEndian.Uint32(buf[in.K:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			taken := acc == in.K
			if in.Code&0xf0 == unix.BPF_JSET {
				taken = acc&in.K != 0
			}
			if taken {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K, nil
		default:
			return 0, fmt.Errorf("pc %d: opcode %#x", pc, in.Code)
		}
	}
	return 0, fmt.Errorf("fell off the end")
}

// TestHostFilterProgram checks the program's answer for every socket family
// and netlink protocol (with and without high bits set), and for each other
// rule, against FilterSummary's words.
func TestHostFilterProgram(t *testing.T) {
	prog, err := HostFilter()
	if err != nil {
		t.Fatal(err)
	}
	call := func(nr uint32, args ...uint64) seccompData {
		d := seccompData{nr: nr, arch: nativeArch}
		copy(d.args[:], args)
		return d
	}
	expect := func(name string, d seccompData, want uint32) {
		t.Helper()
		got, err := run(prog, d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != want {
			t.Errorf("%s: got %#x, want %#x", name, got, want)
		}
	}
	const high = 0xdead_0000_0000
	allowed := sockrule.AllowedSocketFamilies()
	for af := uint64(0); af < 300; af++ {
		want := uint32(retEPERM)
		if slices.Contains(allowed, af) {
			want = retAllow
		}
		for _, h := range []uint64{0, high, 1 << 32} {
			expect(fmt.Sprintf("socket(%#x)", h|af), call(unix.SYS_SOCKET, h|af, unix.SOCK_RAW, 0), want)
		}
		wantPair := uint32(retEPERM)
		if af == unix.AF_UNIX {
			wantPair = retAllow
		}
		expect(fmt.Sprintf("socketpair(%d)", af), call(unix.SYS_SOCKETPAIR, high|af, unix.SOCK_STREAM, 0, 0), wantPair)
	}
	for proto := uint64(0); proto < 64; proto++ {
		want := uint32(retEPERM)
		if slices.Contains(sockrule.AllowedNetlinkProtocols(), proto) {
			want = retAllow
		}
		expect(fmt.Sprintf("socket(AF_NETLINK, %d)", proto), call(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, high|proto), want)
	}

	expect("foreign arch", seccompData{nr: unix.SYS_GETPID, arch: unix.AUDIT_ARCH_I386}, retKill)
	expect("foreign arch socket", seccompData{nr: unix.SYS_SOCKET, arch: unix.AUDIT_ARCH_ARM, args: [6]uint64{unix.AF_INET}}, retKill)
	if x32Bit != 0 {
		expect("x32 socket", call(x32Bit|unix.SYS_SOCKET, unix.AF_INET), retENOSYS)
		expect("x32 getpid", call(x32Bit|unix.SYS_GETPID), retENOSYS)
	}
	expect("clone3", call(unix.SYS_CLONE3), retENOSYS)
	for _, nr := range []uint32{unix.SYS_UNSHARE, unix.SYS_CLONE} {
		expect("newuser", call(nr, unix.CLONE_NEWUSER), retEPERM)
		expect("newuser high", call(nr, high|unix.CLONE_NEWUSER|unix.CLONE_NEWNS), retEPERM)
		expect("newns", call(nr, unix.CLONE_NEWNS), retAllow)
		expect("thread", call(nr, unix.CLONE_VM|unix.CLONE_THREAD|unix.CLONE_SIGHAND), retAllow)
	}
	for _, cmd := range []uint64{unix.TIOCSTI, unix.TIOCLINUX} {
		expect("ioctl refused", call(unix.SYS_IOCTL, 0, cmd), retEPERM)
		expect("ioctl refused high", call(unix.SYS_IOCTL, 0, high|cmd), retEPERM)
	}
	expect("ioctl TCGETS", call(unix.SYS_IOCTL, 0, unix.TCGETS), retAllow)
	for _, l := range multicastJoins {
		for opt := uint64(0); opt < 80; opt++ {
			want := uint32(retAllow)
			if slices.Contains(l.opts, uint32(opt)) {
				want = retEPERM
			}
			expect(fmt.Sprintf("setsockopt(%s, %d)", l.name, opt), call(unix.SYS_SETSOCKOPT, 3, high|uint64(l.level), high|opt), want)
		}
	}
	for _, level := range []uint64{unix.SOL_SOCKET, unix.SOL_TCP, unix.SOL_UDP} {
		expect(fmt.Sprintf("setsockopt level %d", level), call(unix.SYS_SETSOCKOPT, 3, level, unix.IP_ADD_MEMBERSHIP), retAllow)
	}
	for _, p := range []uint64{0, 8, 0x20000, 0x20008, 0xffffffff, high | 0xffffffff} {
		expect(fmt.Sprintf("personality(%#x)", p), call(unix.SYS_PERSONALITY, p), retAllow)
	}
	for _, p := range []uint64{0x0040000, 0x0400000, 0x0040008} {
		expect(fmt.Sprintf("personality(%#x)", p), call(unix.SYS_PERSONALITY, p), retEPERM)
	}
	for _, name := range append(sockrule.RefusedSyscalls(), hostRefused...) {
		if nr, ok := sysnum[name]; ok {
			expect(name, call(nr), retEPERM)
		}
	}
	for _, nr := range []uint32{unix.SYS_READ, unix.SYS_GETPID, unix.SYS_EXECVE, unix.SYS_CONNECT, unix.SYS_PTRACE} {
		expect(fmt.Sprintf("syscall %d", nr), call(nr), retAllow)
	}
}

// TestRefusedNamed: every refused name is numbered here or compat-only, and
// the summary names each.
func TestRefusedNamed(t *testing.T) {
	if _, err := refusedNumbers(); err != nil {
		t.Fatal(err)
	}
	sum := strings.Join(FilterSummary(), "; ")
	for _, name := range append([]string{"AF_UNIX", "AF_INET6", "AF_NETLINK", "NETLINK_ROUTE", "NETLINK_USERSOCK", "NETLINK_NETFILTER", "IP_ADD_MEMBERSHIP", "IPV6_JOIN_ANYCAST", "clone3", "TIOCSTI"}, hostRefused...) {
		if !strings.Contains(sum, name) {
			t.Errorf("FilterSummary does not name %s: %q", name, sum)
		}
	}
}
