package hostfacts

import (
	"bytes"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// x32SyscallBit marks a syscall number as the x32 ABI's on x86_64
// (__X32_SYSCALL_BIT).
const x32SyscallBit = 0x40000000

var noX32 = sync.OnceValue(probeNoX32)

// NoX32ABI reports whether this kernel is known to have no x32 syscall
// ABI (x86_64 built without CONFIG_X86_X32_ABI, or with it off at boot):
// an x32 getpid(2) answers ENOSYS. It asks only where this process runs
// without a seccomp filter (Seccomp: 0 in /proc/self/status), which could
// answer otherwise or kill it; there, and off x86_64, it says false
// (unknown). The answer is the kernel's: probed once per process.
func NoX32ABI() bool { return noX32() }

func probeNoX32() bool {
	if runtime.GOARCH != "amd64" {
		return false
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil || !bytes.Contains(status, []byte("\nSeccomp:\t0\n")) {
		return false
	}
	_, _, errno := unix.RawSyscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0)
	return errno == unix.ENOSYS
}
