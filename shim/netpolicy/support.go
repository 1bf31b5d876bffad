package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/spec"
)

// Outcome is what one probe of Probe found.
type Outcome string

// Probe outcomes.
const (
	ProbeOK      Outcome = "ok"      // verified present
	ProbeMissing Outcome = "missing" // verified absent: the kernel refused it
	ProbeUnknown Outcome = "unknown" // could not be probed
)

// ProbeResult is one probe's outcome and a sentence for the operator:
// what was verified, or what is missing and how to get it.
type ProbeResult struct {
	Result Outcome
	Detail string
}

// Support is what Probe found about the kernel facilities a contract's
// network authority needs on this host.
type Support struct {
	// Cgroup2 is the cgroup2 mount the table's `socket cgroupv2` match is
	// scoped by (read from the mount table: /sys/fs/cgroup or, on hybrid
	// hosts, /sys/fs/cgroup/unified).
	Cgroup2 ProbeResult
	// SocketCgroupV2 is nf_tables with the `socket cgroupv2` expression,
	// installed and read back.
	SocketCgroupV2 ProbeResult
	// NFLog is a `log group` rule (nfnetlink_log), which the deny logging
	// needs.
	NFLog ProbeResult
	// Table is the runtime's own table for the contract's network section:
	// installed, read back equal to its plan (Apply) and removed.
	Table ProbeResult
}

// Probe answers whether this host can enforce network section n: the
// cgroup2 mount, then every nf_tables probe in one throwaway network
// namespace (see probeNetfilter), with the deny log rules sent to logGroup
// (0: DefaultLogGroup, as the front doors decide without an operator
// log_group). Nothing it creates outlives the call, and it never touches
// the caller's namespace. Without root the nf_tables probes are not run and
// say so (ProbeUnknown).
func Probe(ctx context.Context, n spec.Network, logGroup uint16) Support {
	if logGroup == 0 {
		logGroup = DefaultLogGroup
	}
	s := Support{Cgroup2: probeCgroup2()}
	if os.Geteuid() != 0 {
		s.SocketCgroupV2, s.NFLog, s.Table = needsRoot(), needsRoot(), needsRoot()
		return s
	}
	s.SocketCgroupV2, s.NFLog, s.Table = probeNetfilter(ctx, n, logGroup)
	return s
}

// needsRoot is the answer for nf_tables probes run without root.
func needsRoot() ProbeResult {
	return ProbeResult{ProbeUnknown, "cannot probe: needs root (it creates and destroys a network namespace and an nf_tables table); run the audit as root"}
}

// probeCgroup2 reads the mount table (cgroup.Find): hybrid hosts mount
// cgroup2 at /sys/fs/cgroup/unified, which the runtime handles the same way.
func probeCgroup2() ProbeResult {
	h, err := cgroup.Find()
	switch {
	case errors.Is(err, cgroup.ErrNoCgroup2):
		return ProbeResult{ProbeMissing, "no cgroup2 file system in /proc/self/mountinfo: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with systemd.unified_cgroup_hierarchy=1"}
	case err != nil:
		return ProbeResult{ProbeUnknown, "cannot read the mount table: " + err.Error()}
	}
	return ProbeResult{ProbeOK, fmt.Sprintf("cgroup2 mounted at %s (root %s)", h.Mountpoint, h.Root)}
}
