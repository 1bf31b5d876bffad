package service

import (
	"time"

	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// exitFacts is what the exit path learned: the init's status, when it
// started, and the exit part every front door learns (engine.Exit).
type exitFacts struct {
	status *uint32
	// waitStatus, when set, waits for the inner service's answer for the
	// init and gives status; the pipeline calls it before the manifest.
	waitStatus func() *uint32
	started    time.Time
	engine.Exit
}

// manifest assembles the effect manifest. It claims only what a control
// enforced (the installed, read-back table; the removed capabilities) or
// what was observed (counters, the gate's reading of the diff); nothing is
// ever semantically verified or promoted.
func (op *operation) manifest(x exitFacts) *spec.Manifest {
	a := op.admission
	m := &spec.Manifest{
		Schema:      spec.SchemaManifest,
		OperationID: op.id,
		Namespace:   op.namespace,
		ContainerID: op.containerID,
		Enforcement: spec.Enforcement{Network: spec.NetworkEnforcement{
			Mechanism: "nftables", Scope: "cgroupv2", Mode: op.contract.Network.Mode,
			Loopback: op.contract.Network.Loopback, Table: a.Table, Allow: op.contract.Network.Allow,
			Serve: op.contract.Network.Serve,
		}},
	}
	if s := a.Subject; s != nil {
		engine.Bound(m, *s, a.Netns, netnsKind(a.Netns) == netnsPrivate)
	}
	// Abstract AF_UNIX sockets live in the netns and no nftables hook
	// sees them: isolated only when the netns is the container's own.
	m.Enforcement.Network.AbstractUnix = spec.AbstractUnixNotEnforced
	if netnsKind(a.Netns) == netnsPrivate {
		m.Enforcement.Network.AbstractUnix = spec.AbstractUnixNetns
	} else {
		m.Enforcement.NotEnforced = append(m.Enforcement.NotEnforced, engine.NotEnforcedAbstractUnix("container", a.Netns),
			engine.NotEnforcedOutsideCgroup("container", a.Netns, "its own cgroup namespace, no writable cgroupfs"))
	}
	m.Enforcement.NotEnforced = append(m.Enforcement.NotEnforced,
		"exec'd programs: each exec is admitted by the capability policy and bound by the table, but its program is not part of the observation the contract was chosen for",
		"the image's other files: the observation hashes the entrypoint's bytes; the libraries, interpreter and data it loads from the image are not hashed (mounts over them are refused)")
	if a.Seccomp != nil {
		m.Enforcement.Seccomp = a.Seccomp
	}
	m.Enforcement.ExecNoNewPrivileges = true
	engine.Admission(m, a.AdmissionDecision, x.started)
	m.Enforcement.CapabilitiesRemovedExecs = int(op.capExecs.Load())
	if len(a.CapabilitiesRemoved) > 0 || m.Enforcement.CapabilitiesRemovedExecs > 0 {
		// admission.json names the sets; the manifest names the
		// capability, removed from the spec and from that many execs.
		m.Enforcement.CapabilitiesRemoved = []string{capNetRaw}
	}
	if x.status != nil {
		m.ExitStatus = *x.status
	}
	m.Enforcement.Network.Status = spec.NetworkEnforced
	// Complete only when every denied packet the table counted was heard
	// and listed: an empty list never claims that nothing was tried.
	x.Findings, x.FindingsErr = events.Findings(op.store, op.id)
	engine.Exited(m, x.Exit, netnsKind(a.Netns) != netnsPrivate)
	if x.Counters == nil && x.CountErr == nil && a.Table != "" {
		m.Observation.Counters.Error = "not read: the task never ran"
	}
	if c := x.Counters; c != nil && len(op.contract.Network.Serve) > 0 {
		sv := &spec.Served{Packets: c.Served.Packets, Bytes: c.Served.Bytes, Connections: c.ServedConnections}
		for _, p := range c.ServeCounts {
			sv.Ports = append(sv.Ports, spec.ServedCount{Proto: netpolicy.ProtoName(p.Port.Proto), Port: int(p.Port.Port),
				Packets: p.Count.Packets, Bytes: p.Count.Bytes})
		}
		sv.PortsWithheld = c.ElementsWithheld
		sv.ReversePathDropped = c.ServedSpoofed.Packets
		m.Observation.Served = sv
	}
	return m
}
