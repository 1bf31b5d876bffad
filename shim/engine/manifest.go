package engine

import (
	"encoding/json"
	"sync"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// manifestEncoders is encoding/json's encoders of the manifest's types,
// built once per process (WarmManifest).
var manifestEncoders sync.Once

// WarmManifest builds the manifest's JSON encoders (encoding/json builds a
// type's on its first use, and the manifest's are a large tree) in the
// background, once per process. A door calls it while it only waits for
// its workload (the shim for Start once a task is created, a host run
// while its command runs, the hooks' monitor once the container is
// bound): the exit path, which makes the manifest durable before the exit
// is reported, then finds them built. It changes no byte of any manifest.
func WarmManifest() {
	go manifestEncoders.Do(func() { _, _ = json.Marshal(&spec.Manifest{}) })
}

// Door is what a front door says of its operation in the manifest, beside
// what the engine says the same way for every door: the admission record,
// and what only that door enforced or leaves open.
type Door struct {
	Namespace   string
	ContainerID string
	// Subject names the workload in the not_enforced lines ("container",
	// "command").
	Subject   string
	Admission *spec.Admission
	// AbstractUnix, when set, is how abstract AF_UNIX sockets were kept
	// from a workload in a shared netns (a host run's Landlock scope);
	// unset, they are isolated only by a netns of the workload's own.
	AbstractUnix string
	// Confined, in a shared netns, says why the workload itself cannot
	// leave its cgroup ("" claims nothing).
	Confined string
	// NotEnforced are the door's own not_enforced lines, after the
	// engine's.
	NotEnforced []string
	// Host is a host run's account of its sandbox.
	Host                     *spec.HostRun
	ExecNoNewPrivileges      bool
	CapabilitiesRemoved      []string
	CapabilitiesRemovedExecs int
}

// Manifest assembles the effect manifest of one operation, the same
// through every front door. It claims only what a control enforced (the
// installed, read-back table; the removed capabilities; the door's
// sandbox) or what was observed (counters, denied attempts, served
// traffic, the gate's reading of the diff, the findings); nothing is ever
// semantically verified or promoted.
func Manifest(store record.Store, d Door, x Facts) *spec.Manifest {
	a := d.Admission
	c := a.Contract.Network
	m := &spec.Manifest{
		Schema:      spec.SchemaManifest,
		OperationID: a.OperationID,
		Namespace:   d.Namespace,
		ContainerID: d.ContainerID,
		Host:        d.Host,
		Enforcement: spec.Enforcement{
			Network: spec.NetworkEnforcement{Mechanism: "nftables", Scope: "cgroupv2", Mode: c.Mode, Loopback: c.Loopback,
				Table: a.Table, Allow: c.Allow, Serve: c.Serve, Status: spec.NetworkEnforced},
			Seccomp:                  a.Seccomp,
			ExecNoNewPrivileges:      d.ExecNoNewPrivileges,
			CapabilitiesRemoved:      d.CapabilitiesRemoved,
			CapabilitiesRemovedExecs: d.CapabilitiesRemovedExecs,
		},
	}
	shared := a.Netns.Shared()
	if s := a.Subject; s != nil {
		Bound(m, *s, a.Netns, !shared)
	}
	m.Enforcement.NotEnforced = append(notEnforcedNetns(&m.Enforcement.Network, d, shared), d.NotEnforced...)
	Admission(m, a.AdmissionDecision, x.Started)
	if x.Status != nil {
		m.ExitStatus = *x.Status
	}
	x.Findings, x.FindingsErr = events.Findings(store, a.OperationID)
	Exited(m, x.Exit, shared)
	if x.Counters == nil && x.CountErr == nil && a.Table != "" {
		m.Observation.Counters.Error = "not read: the task never ran"
	}
	if x.Counters != nil && len(c.Serve) > 0 {
		m.Observation.Served = served(x.Counters)
	}
	return m
}

// notEnforcedNetns sets how abstract AF_UNIX sockets were isolated and
// returns what a shared netns leaves open: abstract sockets nftables cannot
// see (unless the door scoped them), and processes outside the bound
// cgroup, which the table does not match.
func notEnforcedNetns(n *spec.NetworkEnforcement, d Door, shared bool) []string {
	if !shared {
		n.AbstractUnix = spec.AbstractUnixNetns
		return []string{}
	}
	netns := d.Admission.Netns
	var out []string
	n.AbstractUnix = d.AbstractUnix
	if d.AbstractUnix == "" {
		n.AbstractUnix = spec.AbstractUnixNotEnforced
		out = append(out, NotEnforcedAbstractUnix(d.Subject, netns))
	}
	return append(out, NotEnforcedOutsideCgroup(d.Subject, netns, d.Confined))
}

// served is the manifest's account of the traffic the workload served on
// the contract's serve ports.
func served(c *netpolicy.Counters) *spec.Served {
	sv := &spec.Served{Packets: c.Served.Packets, Bytes: c.Served.Bytes, Connections: c.ServedConnections}
	for _, p := range c.ServeCounts {
		sv.Ports = append(sv.Ports, spec.ServedCount{Proto: netpolicy.ProtoName(p.Port.Proto), Port: int(p.Port.Port),
			Packets: p.Count.Packets, Bytes: p.Count.Bytes})
	}
	sv.PortsWithheld = c.ElementsWithheld
	sv.ReversePathDropped = c.ServedSpoofed.Packets
	return sv
}
