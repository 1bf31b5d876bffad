package spec

import "time"

// Manifest is the effect manifest of one operation (docs/design.md §6), written
// once at the end of the gate. It keeps enforcement (what a control
// guaranteed) apart from observation (what was seen), and never claims
// semantic verification or promotion: both flags are always false.
//
// Slices are omitempty because strict decoding refuses JSON null; an
// omitted list means "none recorded", never "none happened".
type Manifest struct {
	Schema            string           `json:"schema"` // SchemaManifest
	OperationID       string           `json:"operation_id"`
	Namespace         string           `json:"namespace,omitempty"`    // containerd namespace
	ContainerID       string           `json:"container_id,omitempty"` // containerd container id
	Host              *HostRun         `json:"host,omitempty"`         // gensee boundary run only
	Subject           Subject          `json:"subject"`
	Contract          ContractRef      `json:"contract"`
	CatalogVersion    uint64           `json:"catalog_version"`
	ObservationDigest string           `json:"observation_digest"`     // "sha256:<hex>"
	CommandDigest     string           `json:"command_digest"`         // "sha256:<hex>"
	VolatileEnv       []string         `json:"volatile_env,omitempty"` // names the selector's volatile_env left out of command_digest
	Inference         InferenceSummary `json:"inference"`
	Deadlines         Deadlines        `json:"deadlines"`
	Enforcement       Enforcement      `json:"enforcement"`
	Observation       Observed         `json:"observation"`
	Products          []ProductRecord  `json:"products,omitempty"`
	Gate              GateResult       `json:"gate"`
	Unclaimed         Unclaimed        `json:"unclaimed"`
	Excluded          Excluded         `json:"excluded"`
	// Findings are the control_defeat findings the watchdog raised while
	// the subject ran (cleared by a person or not: they happened);
	// FindingsError says why they could not be read (the list may then be
	// short).
	Findings             []Finding `json:"findings,omitempty"`
	FindingsError        string    `json:"findings_error,omitempty"`
	Drained              int       `json:"drained"`     // processes killed after init exited
	ExitStatus           uint32    `json:"exit_status"` // init's exit status
	SemanticallyVerified bool      `json:"semantically_verified"`
	Promoted             bool      `json:"promoted"`
}

// Subject pins the process tree the operation governed.
type Subject struct {
	InitPID    int    `json:"init_pid"`
	StartTime  uint64 `json:"start_time"` // /proc/<pid>/stat field 22, clock ticks since boot
	CgroupPath string `json:"cgroup_path"`
	CgroupID   uint64 `json:"cgroup_id"` // inode of the cgroup v2 directory
}

// ContractRef names the admitted contract and its digest (Digest(contract)).
type ContractRef struct {
	ID     string `json:"id"`
	Digest string `json:"digest"`
}

// InferenceSummary records how the contract was chosen. SafeDefault is true
// when admission fell back to the selector's safe_default; Reason then says why.
type InferenceSummary struct {
	Analyzer     string `json:"analyzer,omitempty"`
	Model        string `json:"model,omitempty"`
	Class        string `json:"class,omitempty"` // top candidate
	ConfidenceBP int    `json:"confidence_bp"`
	SafeDefault  bool   `json:"safe_default"`
	Reason       string `json:"reason,omitempty"`
	// Source is where the inference came from: InferenceFromAnnotation
	// (the caller attached it) or InferenceFromAnalyzer (the runtime asked
	// the selector's node analyzer); "" when there was none to weigh.
	Source string `json:"source,omitempty"`
	// AnalyzerOutcome is what asking the analyzer came to when it gave no
	// inference admission accepted (an AnalyzerConsult outcome: no_class,
	// timeout, unreachable, malformed, rejected).
	AnalyzerOutcome string `json:"analyzer_outcome,omitempty"`
}

// Sources of an inference (InferenceSummary.Source).
const (
	InferenceFromAnnotation = "annotation"
	InferenceFromAnalyzer   = "analyzer"
)

// Deadlines records the time limits in force.
type Deadlines struct {
	Task               string    `json:"task,omitempty"` // the contract's deadline (Go duration)
	TaskExpiresAt      time.Time `json:"task_expires_at,omitzero"`
	InferenceExpiresAt time.Time `json:"inference_expires_at,omitzero"`
	CatalogExpiresAt   time.Time `json:"catalog_expires_at,omitzero"`
	Exceeded           bool      `json:"exceeded"`
}

// Enforcement is what the controls guaranteed.
type Enforcement struct {
	Network             NetworkEnforcement `json:"network"`
	CapabilitiesRemoved []string           `json:"capabilities_removed,omitempty"` // e.g. "CAP_NET_RAW (bounding)"
	// CapabilitiesRemovedExecs counts the execs CapabilitiesRemoved was
	// also removed from (a routine rewrite: a fact here, not an event).
	CapabilitiesRemovedExecs int `json:"capabilities_removed_execs,omitempty"`
	// Seccomp is what the runtime merged into the container's seccomp
	// profile, which runc applies to the init and to every exec.
	Seccomp *SeccompEnforcement `json:"seccomp,omitempty"`
	// ExecNoNewPrivileges: every exec'd process ran with no_new_privs.
	ExecNoNewPrivileges bool `json:"exec_no_new_privileges,omitempty"`
	// NotEnforced names, in words, ways out of the container that no
	// control of this operation closes. Never hidden; empty means none known.
	NotEnforced []string `json:"not_enforced,omitempty"`
}

// SeccompEnforcement is the runtime's part of the seccomp profile: socket
// families nftables cannot see, and syscalls that open sockets without
// socket(2), all refused with EPERM.
type SeccompEnforcement struct {
	ProfileCreated        bool     `json:"profile_created"` // the spec had none; containerd's default (RuntimeDefault) was merged
	SocketFamiliesRefused []string `json:"socket_families_refused"`
	SyscallsRefused       []string `json:"syscalls_refused,omitempty"`
}

// Network enforcement statuses (NetworkEnforcement.Status).
const (
	NetworkEnforced       = "enforced"        // installed and read back; no process seen outside its scope
	NetworkEscapeDetected = "escape_detected" // a process of the container was seen outside the bound cgroup in a shared netns
	NetworkDriftDetected  = "drift_detected"  // the table was seen to differ from its plan (or vanish) while the subject ran, in any netns
	NetworkUnwatched      = "unwatched"       // installed and read back, but the monitor died while the subject ran: drift and escapes after that were not observed
	NetworkDefeatDetected = "defeat_detected" // a target the table denied was later seen reached or answered (deny_then_reach): packets got past it
)

// Network enforcement scopes (NetworkEnforcement.Scope).
const (
	ScopeCgroup = "cgroupv2" // shared netns: rules match the container's cgroup
	ScopeNetns  = "netns"    // the container's own netns: everything not allowed is dropped, whatever the cgroup
)

// Abstract AF_UNIX socket isolation (NetworkEnforcement.AbstractUnix).
const (
	AbstractUnixNetns       = "netns"        // the container's own netns holds its abstract namespace
	AbstractUnixNotEnforced = "not_enforced" // a shared netns: nftables cannot see them
	AbstractUnixLandlock    = "landlock"     // a host run: Landlock scopes the command's abstract sockets to itself
)

// NetworkEnforcement describes the installed policy: mechanism ("nftables"),
// scope (e.g. "cgroupv2"), the contract's mode and loopback policy, the table
// name and the exact tuples allowed.
type NetworkEnforcement struct {
	Mechanism string      `json:"mechanism"`
	Scope     string      `json:"scope"`
	Mode      string      `json:"mode"`
	Loopback  string      `json:"loopback,omitempty"`
	Table     string      `json:"table"`
	Allow     []AllowRule `json:"allow,omitempty"`
	// Serve lists the ports whose inbound connections' replies the table
	// accepts (the contract's network.serve).
	Serve []ServeRule `json:"serve,omitempty"`
	// TableRemoved says how the table went at exit: "deleted", or
	// "with_netns" when it lived in a private network namespace that died
	// with the container. Empty: it was not removed (see the shim's log).
	TableRemoved string `json:"table_removed,omitempty"`
	// Status is NetworkEnforced only when no finding touched the network:
	// NetworkDriftDetected when the table watcher saw the table differ
	// from its plan (Observed.TableDrift, a table_tampered finding), else
	// NetworkDefeatDetected when a denied target was later reached (a
	// deny_then_reach finding), else NetworkEscapeDetected when a process
	// of the container was found outside the scope the table binds
	// (Observed.Escapes), else NetworkUnwatched when the operation's
	// monitor died before the end.
	// Empty in manifests written before it existed.
	Status string `json:"status,omitempty"`
	// AbstractUnix says whether abstract AF_UNIX sockets, which no
	// nftables hook sees, are isolated (AbstractUnixNetns) or not.
	AbstractUnix string `json:"abstract_unix,omitempty"`
}

// Observed is what was seen, without any guarantee of completeness unless
// a field says so.
type Observed struct {
	Counters       Counters       `json:"counters"`
	DeniedAttempts DeniedAttempts `json:"denied_attempts"`
	// Served counts the replies the table accepted for connections that
	// arrived on a network.serve port (absent when the contract serves none).
	Served *Served `json:"served,omitempty"`
	// Escapes lists processes of the container found outside the bound
	// cgroup while it ran (a policy_unbound finding each).
	Escapes []Escape `json:"escapes,omitempty"`
	// TableDrift lists, oldest first, what the table watcher saw differ
	// from the table's plan while the subject ran (a table_tampered event
	// each; the first 16, the rest in events.jsonl).
	TableDrift []string `json:"table_drift,omitempty"`
}

// Served is what the table counted for network.serve: reply packets and
// bytes, and TCP connections answered (SYN-ACKs sent), per port too.
type Served struct {
	Packets     uint64        `json:"packets"`
	Bytes       uint64        `json:"bytes"`
	Connections uint64        `json:"connections"`
	Ports       []ServedCount `json:"ports,omitempty"`
	// PortsWithheld says why Ports is left out: the table's per-element
	// counts (per port, or per allowed tuple) exceeded the named counters
	// that counted the same packets (Packets and Bytes here, or the
	// allowed counters), so the table's counters were reset or its
	// elements written from outside its rules.
	PortsWithheld string `json:"ports_withheld,omitempty"`
	// ReversePathDropped counts the inbound packets to a served port the
	// table dropped because their source would not be routed back out of
	// the interface they arrived on (or came over loopback from an address
	// not the namespace's): forged sources that would otherwise have made
	// the workload answer a peer that never contacted it.
	ReversePathDropped uint64 `json:"reverse_path_dropped,omitempty"`
}

// ServedCount is one serve port's reply counters.
type ServedCount struct {
	Proto   string `json:"proto"`
	Port    int    `json:"port"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Escape is one process of the container seen outside the bound cgroup.
type Escape struct {
	PID    int       `json:"pid"`
	Cgroup string    `json:"cgroup"` // the cgroup it was found in
	At     time.Time `json:"at,omitzero"`
	Killed bool      `json:"killed"` // killed by the exit drain
}

// Counters are the policy's aggregate packet and byte counters.
type Counters struct {
	AllowedPackets uint64 `json:"allowed_packets"`
	AllowedBytes   uint64 `json:"allowed_bytes"`
	DeniedPackets  uint64 `json:"denied_packets"`
	DeniedBytes    uint64 `json:"denied_bytes"`
	// Error is set when the counters could not be read; the numbers are
	// then zero and mean nothing.
	Error string `json:"error,omitempty"`
}

// DeniedAttempts lists denied connection attempts seen (rate-limited log).
// Complete is true only if no record was dropped; an empty list with
// Complete false says nothing about whether attempts occurred.
type DeniedAttempts struct {
	Items    []DeniedAttempt `json:"items,omitempty"`
	Complete bool            `json:"complete"`
}

// DeniedAttempt is one logged denial.
type DeniedAttempt struct {
	Target string    `json:"target"` // "ip:port", "[ip6]:port" or "ip" for icmp
	Proto  string    `json:"proto"`
	At     time.Time `json:"at,omitzero"`
}

// ProductRecord is the gate's result for one declared product.
type ProductRecord struct {
	Class      string        `json:"class"`
	Slot       string        `json:"slot"`
	Verdict    string        `json:"verdict"` // VerdictPass | VerdictFail
	Bytes      int64         `json:"bytes"`
	SHA256     string        `json:"sha256,omitempty"`      // single-file classes and patches: hex of the staged bytes
	TreeDigest string        `json:"tree_digest,omitempty"` // blob_set and directory_tree: "sha256:<hex>" over the sorted entries
	Staged     string        `json:"staged,omitempty"`      // path under the operation's staged/ directory
	Entries    []EntryRecord `json:"entries,omitempty"`
}

// EntryRecord is one staged file, directory or symlink of a product.
type EntryRecord struct {
	Op     string `json:"op,omitempty"` // workspace_patch only: add | modify | delete
	Path   string `json:"path"`         // relative to the workspace, like the slot
	Type   string `json:"type"`         // file | dir | symlink; empty for a patch deletion
	Mode   string `json:"mode"`         // four octal digits as found; staged copies have setuid/setgid/sticky cleared
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"` // hex, files only
	Target string `json:"target,omitempty"` // symlinks only
}

// Gate verdicts.
const (
	VerdictPass   = "pass"
	VerdictFail   = "fail"
	VerdictNotRun = "not_run" // the task was never started, or the gate could not run
)

// GateResult is the overall verdict and every violation found.
type GateResult struct {
	Verdict    string      `json:"verdict"`
	Violations []Violation `json:"violations,omitempty"`
}

// Violation is one broken product rule.
type Violation struct {
	Slot   string `json:"slot,omitempty"`
	Path   string `json:"path,omitempty"`
	Rule   string `json:"rule"` // e.g. "max_bytes", "modes", "symlink", "missing"
	Detail string `json:"detail"`
}

// Unclaimed summarises changes no product claimed: how many and a digest
// over their sorted list.
type Unclaimed struct {
	Count  int64  `json:"count"`
	Digest string `json:"digest,omitempty"`
}

// Excluded counts what the gate left out on purpose: entries under
// excluded names (ExcludedName), mount stubs, and entries still as they
// were in the upper directory before the workload started (the gate's
// baseline).
type Excluded struct {
	Count int64 `json:"count"`
}

// HostRun describes a host command run by `gensee boundary run`: who it ran
// as and every place it could write. Writable lists those places: the
// staged workspace (an overlay whose upper dir the gate read; the real
// workspace was its read-only lower) and private tmpfs mounts discarded at
// exit; every other mount was read-only to the command.
type HostRun struct {
	Runtime         string   `json:"runtime"` // "host"
	User            string   `json:"user,omitempty"`
	UID             uint32   `json:"uid"`
	GID             uint32   `json:"gid"`
	Workspace       string   `json:"workspace"`
	Writable        []string `json:"writable"`
	NoNewPrivileges bool     `json:"no_new_privileges"`
	// Capabilities the command held: always empty.
	Capabilities []string `json:"capabilities"`
	// Sandbox is what held the command apart from the host, layer by
	// layer, as applied before its exec. Nil in manifests written before
	// it existed.
	Sandbox *HostSandbox `json:"sandbox,omitempty"`
}

// HostSandbox lists the layers a host run's command ran inside; each entry
// names a layer that was applied, never one only asked for.
type HostSandbox struct {
	// Namespaces the command had of its own: "user (uid U mapped to
	// itself, nothing else)", "pid", "ipc", "uts", "cgroup", "mount".
	Namespaces []string `json:"namespaces"`
	// Session: a new session without a controlling terminal.
	Session string `json:"session"`
	// Stdio says, per stream, what the command was handed: the caller's
	// file, or a pipe gensee relayed to the caller's terminal.
	Stdio []string `json:"stdio,omitempty"`
	// Executable: what was executed (a sealed copy of the hashed bytes).
	Executable string `json:"executable"`
	// Landlock is the ruleset the command ran under; nil when the kernel
	// has none (then Masked and the mounts are the only file layer).
	Landlock *LandlockLayer `json:"landlock,omitempty"`
	// Seccomp lists what the command's seccomp filter refused.
	Seccomp []string `json:"seccomp"`
	// Masked lists the host paths the command could not reach.
	Masked []string `json:"masked"`
}

// LandlockLayer is a Landlock ruleset as it held at the kernel's ABI.
type LandlockLayer struct {
	ABI     int      `json:"abi"`
	FS      []string `json:"fs,omitempty"`      // the file-system rules, in words
	Net     []string `json:"net,omitempty"`     // the TCP rules, in words
	Scoped  []string `json:"scoped,omitempty"`  // "abstract_unix_socket", "signal"
	Missing []string `json:"missing,omitempty"` // asked for, not enforceable at this ABI
}
