package spec

// Network modes of a contract.
const (
	NetworkDenyAll    = "deny_all"
	NetworkAllowExact = "allow_exact"
)

// Loopback policies of a contract's network section.
const (
	LoopbackDeny  = "deny"
	LoopbackAllow = "allow"
)

// Protocols an allow_exact tuple may name.
const (
	ProtoTCP    = "tcp"
	ProtoUDP    = "udp"
	ProtoICMP   = "icmp"
	ProtoICMPv6 = "icmpv6"
)

// Unclaimed-change policies of a contract: what the gate does with changes
// outside every declared product, exclusion and mount stub.
const (
	// UnclaimedCount (the default) counts them in the manifest
	// (unclaimed.count and digest); the verdict does not depend on them.
	UnclaimedCount = "count"
	// UnclaimedFail fails the gate when there is any (rule
	// unclaimed_change): "this workload may change only these paths".
	UnclaimedFail = "fail"
)

// Product classes (docs/design.md §4).
const (
	ClassBlob                = "blob"
	ClassBlobSet             = "blob_set"
	ClassDirectoryTree       = "directory_tree"
	ClassWorkspacePatch      = "workspace_patch"
	ClassStructuredResult    = "structured_result"
	ClassEnvironmentSnapshot = "environment_snapshot"
)

// Contract is one approved contract inside a catalog. It names what the
// container may reach and what it is expected to produce.
type Contract struct {
	ID        string    `json:"id"`
	Version   int64     `json:"version"`
	Network   Network   `json:"network"`
	Workspace string    `json:"workspace,omitempty"` // absolute path in the container; default "/"
	Deadline  string    `json:"deadline,omitempty"`  // Go duration, e.g. "15m"; empty: none
	Products  []Product `json:"products,omitempty"`
	// Unclaimed is UnclaimedCount (default when empty) or UnclaimedFail.
	Unclaimed string `json:"unclaimed,omitempty"`
	// Capabilities the workload may hold beyond the runtime's default set
	// (containerd's defaults minus CAP_NET_RAW). Never one of NeverGranted.
	Capabilities []string `json:"capabilities,omitempty"`
}

// Network is a contract's outbound network authority.
type Network struct {
	Mode     string      `json:"mode"`               // deny_all | allow_exact
	Allow    []AllowRule `json:"allow,omitempty"`    // only with allow_exact
	Loopback string      `json:"loopback,omitempty"` // deny (default) | allow
	// Serve lists the ports the workload may accept connections on: the
	// replies of a connection that arrived on one (conntrack: original
	// direction inbound to that port) are allowed. Outbound authority is
	// unchanged.
	Serve []ServeRule `json:"serve,omitempty"`
}

// ServeRule is one port the workload serves: tcp or udp, a single port.
type ServeRule struct {
	Proto string `json:"proto"`
	Port  int    `json:"port"`
}

// AllowRule is one exact outbound tuple: a single IP address, a protocol
// and, for tcp and udp, a single port.
type AllowRule struct {
	IP    string `json:"ip"`
	Proto string `json:"proto"`
	Port  int    `json:"port,omitempty"`
}

// Product declares one output the gate checks at task exit.
type Product struct {
	Class         string   `json:"class"`
	Slot          string   `json:"slot"` // relative to the workspace
	MaxEntries    int64    `json:"max_entries,omitempty"`
	MaxBytes      int64    `json:"max_bytes,omitempty"`
	Modes         []string `json:"modes,omitempty"` // octal permission strings, e.g. "0644"
	MaxDepth      int      `json:"max_depth,omitempty"`
	AllowSymlinks bool     `json:"allow_symlinks,omitempty"`
}
