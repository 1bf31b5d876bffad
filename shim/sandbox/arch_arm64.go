package sandbox

import "golang.org/x/sys/unix"

// nativeArch is the only AUDIT_ARCH the host filter lets through: 32-bit
// ARM (compat) syscalls are killed.
const nativeArch = unix.AUDIT_ARCH_AARCH64

// x32Bit is 0: arm64 has no second ABI under its own AUDIT_ARCH.
const x32Bit = 0

// archName names nativeArch in FilterSummary.
const archName = "aarch64"
