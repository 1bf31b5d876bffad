package specpolicy

// Grants is what the admitted contract grants beyond the default set.
type Grants struct {
	Capabilities []string // canonical CAP_ names, e.g. "CAP_SYS_NICE"
}

// FSTyper returns the filesystem magic (statfs f_type) of a host path. The shim passes
// one that statfs(2)s bind sources; nil means path prefixes alone decide.
type FSTyper func(path string) (fsMagic int64, err error)

// Operator is policy from the root-owned operator config.
type Operator struct {
	HookAllowlist []string // absolute paths of OCI hook binaries callers may use
	StateDirs     []string // the operator's state dirs; never bind-mountable
	FSTyper       FSTyper  // optional; see FSTyper
	// Submounts, when set, lists the filesystem types of the mounts
	// strictly beneath a host path (what an rbind of it carries along).
	// nil: every recursive bind is assumed to carry submounts.
	Submounts func(path string) []string
	// WritableBindRoots are the host directories under which a spec may
	// bind a source writable (the kubelet's pod volumes, say). Any other
	// bind must be read-only: a writable host path (/etc, the runtime's
	// binaries, /etc/gensee) would let the workload take the host.
	WritableBindRoots []string
	// AllowedRuntimeFiles are exact host paths under a runtime's
	// directories that a spec may bind anyway (an image builder's trace
	// socket, say): the operator vouches that they start nothing.
	AllowedRuntimeFiles []string
	// SandboxID is the CRI pod sandbox the container belongs to (CRI's own
	// annotation, read only in CRI's containerd namespace): only that
	// sandbox's hosts, hostname, resolv.conf and shm may be bound.
	SandboxID string
	// CRISandboxDirs are where CRI keeps pod sandbox directories under
	// containerd's actual root and state (CRISandboxDirs); empty: the
	// stock /var/lib/containerd and /run/containerd ones.
	CRISandboxDirs []string
	// SocketFinder, when set, returns a unix socket at or below a host
	// path ("" for none) or why it cannot tell; nil: no scan.
	SocketFinder func(path string) (string, error)
	// ReadableBindRoots are host directories the operator vouches for: a
	// bind under them is not scanned for unix sockets.
	ReadableBindRoots []string
	// Init is the init's admitted process rules an exec is held to
	// (CheckExecBound); nil at Create and in the OCI hook.
	Init *InitRules
	// OOMScoreAdjFloor is the lowest process.oomScoreAdj admitted: the
	// shim's own oom_score_adj when that is negative (containerd's CRI
	// gives the pause container the runtime's own under
	// restrict_oom_score_adj), else 0.
	OOMScoreAdjFloor int
	// CgroupNsDelegate is the host fact that cgroup2 is mounted with
	// nsdelegate (a cgroup namespace is then a delegation boundary). false
	// (unknown included): a bind of a cgroup filesystem is refused
	// (checkCgroupBind).
	CgroupNsDelegate bool
	// Clone3ENOSYS says the caller verified (SeccompRefusesClone3) that the
	// container's seccomp profile answers clone3 with ENOSYS, for a front
	// door that judges the profile apart from the spec it hands CheckSpec
	// (the OCI hook). CheckSpec also verifies the spec's own profile.
	Clone3ENOSYS bool
	// NoX32ABI is the host fact that the kernel has no x32 syscall ABI
	// (hostfacts.NoX32ABI): a profile's x32 section is then never
	// reached, and CheckSpec leaves it out (runc would compile its rules
	// for every container all the same: about 8 ms of each start).
	NoX32ABI bool
}

// Result says what admission changed and noticed, for the records.
type Result struct {
	CapabilitiesRemoved []string // "CAP_NET_RAW (bounding)", one per set it was removed from
	Seccomp             Seccomp  // what was merged
	Notes               []string // recorded, not refused: e.g. "process.apparmorProfile: unconfined"
}

// Seccomp says what the merge into linux.seccomp did.
type Seccomp struct {
	Created         bool     // the spec had no profile; containerd's default (RuntimeDefault) was merged
	FamiliesRefused []string // e.g. "AF_PACKET", ..., "AF_NETLINK protocols other than ..."
	SyscallsRefused []string // e.g. "io_uring_setup", ...
	// ArchitecturesRemoved lists ABIs dropped from the profile because the family rules
	// cannot hold there (SCMP_ARCH_X86: socketcall), or because the kernel has no such
	// ABI (SCMP_ARCH_X32 where Operator.NoX32ABI); their syscalls get the bad-arch action.
	ArchitecturesRemoved []string
}
