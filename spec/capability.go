package spec

import (
	"regexp"
	"slices"
	"sync"
)

// NeverGranted lists the capabilities no contract can grant: each one lets
// a workload defeat its own boundary or the admission clock — rewrite or
// delete its table (NET_ADMIN), leave its cgroup or namespaces (SYS_ADMIN),
// attach programs that bypass the hooks (BPF, PERFMON), load a module or
// poke kernel memory (SYS_MODULE, SYS_RAWIO), reach host processes
// (SYS_PTRACE), set the clock back so expired evidence passes (SYS_TIME),
// open host files by handle (DAC_READ_SEARCH), reboot or kexec (SYS_BOOT),
// change or bypass the LSM (MAC_ADMIN, MAC_OVERRIDE), open packet sockets
// that no inet hook sees (NET_RAW), read kernel addresses and the log
// (SYSLOG), choose pids so the watchdog's process identity is reused
// (CHECKPOINT_RESTORE), or switch off or stream the host-global audit log
// (AUDIT_CONTROL, AUDIT_READ). Resource and scheduling capabilities
// (SYS_RESOURCE, SYS_NICE, IPC_LOCK, ...) act inside the container's own
// cgroup and namespaces and may be granted. The list is part of the
// contract's rules; the runtime's spec admission uses the same list.
var NeverGranted = []string{
	"CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_BPF", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
	"CAP_SYS_PTRACE", "CAP_SYS_TIME", "CAP_DAC_READ_SEARCH", "CAP_SYS_BOOT",
	"CAP_MAC_ADMIN", "CAP_MAC_OVERRIDE", "CAP_PERFMON", "CAP_NET_RAW",
	"CAP_SYSLOG", "CAP_CHECKPOINT_RESTORE", "CAP_AUDIT_CONTROL", "CAP_AUDIT_READ",
}

// capName is the canonical spelling of a Linux capability.
var capName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^CAP_[A-Z_]{2,32}$`) })

// knownCaps are the capabilities the kernel defines (capability(7), 6.x).
var knownCaps = []string{
	"CAP_AUDIT_CONTROL", "CAP_AUDIT_READ", "CAP_AUDIT_WRITE", "CAP_BLOCK_SUSPEND", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH",
	"CAP_FOWNER", "CAP_FSETID", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_KILL", "CAP_LEASE",
	"CAP_LINUX_IMMUTABLE", "CAP_MAC_ADMIN", "CAP_MAC_OVERRIDE", "CAP_MKNOD", "CAP_NET_ADMIN",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_RAW", "CAP_PERFMON", "CAP_SETFCAP",
	"CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_CHROOT",
	"CAP_SYS_MODULE", "CAP_SYS_NICE", "CAP_SYS_PACCT", "CAP_SYS_PTRACE", "CAP_SYS_RAWIO",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_SYSLOG", "CAP_WAKE_ALARM",
}

// KnownCapability reports whether c is a capability the kernel defines,
// spelled canonically ("CAP_SYS_NICE").
func KnownCapability(c string) bool {
	return capName().MatchString(c) && slices.Contains(knownCaps, c)
}

// checkCapabilities validates a contract's capability grants: canonical,
// known, unique, and never one of NeverGranted.
func checkCapabilities(p problems, caps []string) {
	seen := map[string]bool{}
	for i, c := range caps {
		at := joinIndex("capabilities", i)
		switch {
		case !KnownCapability(c):
			p.addf(at, "%q is not a Linux capability spelled like \"CAP_SYS_NICE\"", truncate(c, 40))
		case slices.Contains(NeverGranted, c):
			p.addf(at, "%s can never be granted: it would let the workload defeat its boundary; remove it from the contract", c)
		case seen[c]:
			p.addf(at, "%s is listed twice", c)
		}
		seen[c] = true
	}
}
