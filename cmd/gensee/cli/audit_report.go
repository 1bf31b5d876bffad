package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gensee/gensee/spec"
)

// AuditSchema identifies the JSON shape of boundary audit --json.
const AuditSchema = "gensee.audit/v1"

// Control statuses, from best to worst; the verdict is the worst status of
// the granted controls.
const (
	StatusEnforceable  = "enforceable"   // every host feature the control needs was verified
	StatusUnverified   = "unverified"    // a probe it needs could not run
	StatusObservedOnly = "observed_only" // a feature it needs is missing on this host
	StatusNotGranted   = "not_granted"   // the contract does not ask for it
)

// AuditReport is boundary audit's result. Field order does not matter:
// writeJSON emits keys sorted.
type AuditReport struct {
	Schema   string         `json:"schema"`
	Contract AuditContract  `json:"contract"`
	Grants   AuditGrants    `json:"grants"`
	Controls []AuditControl `json:"controls"`
	Host     AuditHost      `json:"host"`
	// NotEnforced names ways out that no control closes in some network
	// namespaces, with the status they have there. Never hidden.
	NotEnforced []AuditGap `json:"not_enforced"`
	Verdict     string     `json:"verdict"`
	ExitCode    int        `json:"exit_code"`
}

// AuditContract names the audited contract; Digest is spec.Digest of it,
// as the effect manifest records it.
type AuditContract struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
	Digest  string `json:"digest"`
}

// AuditGrants is what the contract grants, defaults filled in.
type AuditGrants struct {
	Network   AuditNetwork   `json:"network"`
	Workspace string         `json:"workspace"`
	Deadline  string         `json:"deadline"` // "" when none
	Products  []spec.Product `json:"products"`
}

// AuditNetwork is the contract's network authority.
type AuditNetwork struct {
	Mode     string           `json:"mode"`
	Allow    []spec.AllowRule `json:"allow"`
	Loopback string           `json:"loopback"` // deny | allow
	Serve    []spec.ServeRule `json:"serve"`    // ports whose inbound connections' replies are allowed
}

// AuditControl is one control and whether this host can enforce it.
type AuditControl struct {
	Name      string   `json:"name"`
	Granted   bool     `json:"granted"`
	Status    string   `json:"status"`
	Mechanism string   `json:"mechanism"`
	Requires  []string `json:"requires"` // probe names
	Detail    string   `json:"detail"`
}

// AuditGap is a path out of the container that is closed in some
// network namespaces and not in others.
type AuditGap struct {
	Name   string   `json:"name"`
	Status string   `json:"status"` // StatusObservedOnly in the namespaces listed
	Netns  []string `json:"netns"`  // "host", "pod"
	Detail string   `json:"detail"`
}

// AuditHost is what the probes found.
type AuditHost struct {
	Root   bool         `json:"root"`
	Kernel string       `json:"kernel"`
	Probes []AuditProbe `json:"probes"` // sorted by name
}

// AuditProbe is one probe's outcome.
type AuditProbe struct {
	Name   string `json:"name"`
	Result string `json:"result"`
	Detail string `json:"detail"`
}

// buildAudit decides the report from the contract and the host facts. It
// is pure: the probing happened before.
func buildAudit(c *spec.Contract, digest string, h HostFacts) AuditReport {
	rep := AuditReport{
		Schema:   AuditSchema,
		Contract: AuditContract{ID: c.ID, Version: c.Version, Digest: digest},
		Grants:   grantsOf(c),
		Host:     AuditHost{Root: h.Root, Kernel: h.Kernel, Probes: []AuditProbe{}},
	}
	for _, name := range slices.Sorted(maps.Keys(h.Probes)) {
		p := h.Probes[name]
		rep.Host.Probes = append(rep.Host.Probes, AuditProbe{Name: name, Result: p.Result, Detail: p.Detail})
	}
	rep.Controls = []AuditControl{
		control(h, "network", true, networkMechanism(rep.Grants.Network),
			"the runtime installs and reads back this table before any image code runs, and refuses the task when it cannot",
			probeCgroup2, probeNftSocket, probeNflog, probeTable),
		control(h, "capabilities", true, capabilitiesMechanism(c),
			"a rewrite of the OCI spec that runc applies, for the init and every exec; it needs no host feature"),
		control(h, "spec", true,
			"the spec is admitted against an allowlist anchored on Kubernetes Pod Security Standards baseline: no caller hooks off the operator's list, no extra devices, no writable cgroupfs/sysfs/procfs/bpffs/debugfs/tracefs/securityfs, no runtime sockets, masked /proc, no host pid/ipc namespace, only network sysctls, no mount over the entrypoint, no joined netns owned by another user namespace",
			"checked by the shim before runc creates the task; it needs no host feature"),
		control(h, "seccomp", true,
			"EPERM for socket(2) of every family but AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK (so AF_PACKET, AF_VSOCK, AF_XDP, AF_RDS, ...), for every AF_NETLINK protocol but NETLINK_ROUTE, NETLINK_SOCK_DIAG, NETLINK_KOBJECT_UEVENT and NETLINK_GENERIC (so NETLINK_USERSOCK and NETLINK_NETFILTER), and for io_uring and socketcall, merged into the container's seccomp profile for the init and every exec: families no nftables hook sees",
			"a runc built without seccomp is refused, never run without it", probeSeccomp),
		control(h, "deadline", c.Deadline != "",
			fmt.Sprintf("the shim kills every process in the task's cgroup %s after start (cgroup.kill, else freeze and SIGKILL)", orNone(c.Deadline)),
			"", probeCgroup2),
		control(h, "products", len(c.Products) > 0,
			fmt.Sprintf("at task exit the gate drains the cgroup, reads the overlay upperdir without following symlinks, checks %d product slot(s) under %s against their class rules and stages passing ones by copy with sha256; nothing is promoted", len(c.Products), c.WorkspaceOrDefault()),
			"needs containerd's overlayfs snapshotter (a single-layer image is a bind mount, not an overlay); this audit cannot see the snapshotter configuration",
			probeCgroup2, probeOverlay),
	}
	rep.NotEnforced = []AuditGap{{
		Name: "abstract_unix", Status: StatusObservedOnly, Netns: []string{"host", "pod"},
		Detail: "abstract AF_UNIX sockets (@name) belong to the network namespace and no nftables hook sees them: in the container's own netns (ctr without --net-host) they are isolated; in the host netns or a pod's shared netns a process listening on one is reachable from the container. Host runs (gensee boundary run) are scoped by Landlock (ABI 6 and later) to sockets of their own run; the manifest says which held",
	}}
	rep.Verdict = StatusEnforceable
	for _, ctl := range rep.Controls {
		if ctl.Granted && rank(ctl.Status) > rank(rep.Verdict) {
			rep.Verdict = ctl.Status
		}
	}
	if rep.Verdict != StatusEnforceable {
		rep.ExitCode = ExitObserved
	}
	return rep
}

func grantsOf(c *spec.Contract) AuditGrants {
	g := AuditGrants{
		Network: AuditNetwork{
			Mode:     c.Network.Mode,
			Allow:    append([]spec.AllowRule{}, c.Network.Allow...),
			Serve:    append([]spec.ServeRule{}, c.Network.Serve...),
			Loopback: c.Network.Loopback,
		},
		Workspace: c.WorkspaceOrDefault(),
		Deadline:  c.Deadline,
		Products:  append([]spec.Product{}, c.Products...),
	}
	if g.Network.Loopback == "" {
		g.Network.Loopback = spec.LoopbackDeny
	}
	return g
}

func networkMechanism(n AuditNetwork) string {
	what := "every packet is counted, logged (rate-limited, NFLOG) and dropped"
	if n.Mode == spec.NetworkAllowExact {
		what = fmt.Sprintf("%d exact address/protocol/port tuple(s) are accepted, everything else is counted, logged (rate-limited, NFLOG) and dropped", len(n.Allow))
	}
	serve := ""
	if len(n.Serve) > 0 {
		var ports []string
		for _, p := range n.Serve {
			ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Proto))
		}
		serve = "; replies of connections that arrived on " + strings.Join(ports, ", ") + " are accepted (network.serve), nothing the container opens gains from it"
	}
	return fmt.Sprintf("one nftables inet table in the container's network namespace: %s%s; loopback %s. In the container's own netns the table covers every packet of the netns (fail closed: leaving the cgroup gains nothing); in a shared netns (host, pod) it matches the container's cgroup by `socket cgroupv2`, and a process found outside that cgroup is a policy_unbound event (the manifest says escape_detected), never reported as enforced", what, serve, loopbackWord(n.Loopback))
}

func capabilitiesMechanism(c *spec.Contract) string {
	extra := "none"
	if len(c.Capabilities) > 0 {
		extra = strings.Join(c.Capabilities, ", ")
	}
	return "containerd's default capability set minus CAP_NET_RAW (removed from every set, every occurrence) plus what the contract grants (" + extra + "); anything else refused, and never " + strings.Join(spec.NeverGranted, ", ") + "; every exec runs with no_new_privs"
}

func loopbackWord(l string) string {
	if l == spec.LoopbackAllow {
		return "allowed"
	}
	return "denied like any destination"
}

func orNone(d string) string {
	if d == "" {
		return "(no deadline)"
	}
	return d
}

// control decides one control's status from the probes it requires: any
// missing makes it observed_only, else any unknown makes it unverified.
func control(h HostFacts, name string, granted bool, mechanism, note string, requires ...string) AuditControl {
	ctl := AuditControl{Name: name, Granted: granted, Mechanism: mechanism, Requires: append([]string{}, requires...)}
	if !granted {
		ctl.Status = StatusNotGranted
		ctl.Detail = "the contract does not ask for it"
		return ctl
	}
	var missing, unknown []string
	for _, r := range requires {
		p, ok := h.Probes[r]
		switch {
		case !ok:
			unknown = append(unknown, r+": not probed")
		case p.Result == ProbeMissing:
			missing = append(missing, r+": "+p.Detail)
		case p.Result != ProbeOK:
			unknown = append(unknown, r+": "+p.Detail)
		}
	}
	switch {
	case len(missing) > 0:
		ctl.Status = StatusObservedOnly
		ctl.Detail = "this host lacks what it needs: " + strings.Join(missing, "; ")
		if name == "network" {
			ctl.Detail += "; the runtime refuses such tasks rather than run them unbound"
		}
	case len(unknown) > 0:
		ctl.Status = StatusUnverified
		ctl.Detail = "not verified: " + strings.Join(unknown, "; ")
	default:
		ctl.Status = StatusEnforceable
		ctl.Detail = "verified on this host"
		if len(requires) == 0 {
			ctl.Detail = "no host probe needed"
		}
	}
	if note != "" {
		ctl.Detail += "; " + note
	}
	return ctl
}

func rank(status string) int {
	switch status {
	case StatusEnforceable:
		return 0
	case StatusUnverified:
		return 1
	case StatusObservedOnly:
		return 2
	}
	return 3
}
