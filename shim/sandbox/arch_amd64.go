package sandbox

import "golang.org/x/sys/unix"

// nativeArch is the only AUDIT_ARCH the host filter lets through: i386
// (int $0x80, where socketcall(2) hides socket arguments behind a pointer)
// is killed.
const nativeArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks x32 syscall numbers on x86_64 (__X32_SYSCALL_BIT): they share
// AUDIT_ARCH_X86_64, so the arch check alone does not catch them.
const x32Bit = 0x40000000

// archName names nativeArch in FilterSummary.
const archName = "x86_64"
