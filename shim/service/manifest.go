package service

import (
	"fmt"
	"time"

	"github.com/gensee/gensee/shim/effect"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// exitFacts is what the exit path learned, in the order it learned it.
type exitFacts struct {
	status   *uint32
	started  time.Time
	drained  int
	drainErr error
	gate     gateOutcome
	gateRan  bool
	counters *countersRecord
	countErr string
	removal  string // removedDeleted, removedWithNetns, or "" (still installed)
	attempts spec.DeniedAttempts
	deadline bool
	// escapes are processes of the container the binding sensor or the
	// drain found outside the bound cgroup (policy_unbound findings).
	escapes []spec.Escape
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
			Serve:        op.contract.Network.Serve,
			TableRemoved: x.removal,
		}},
		Drained: x.drained,
	}
	if s := a.Subject; s != nil {
		m.Subject = spec.Subject{InitPID: s.InitPID, StartTime: s.StartTime, CgroupPath: s.CgroupPath, CgroupID: s.CgroupID}
		m.Enforcement.Network.Scope = fmt.Sprintf("cgroupv2 %s (id %d), %s netns", s.CgroupPath, s.CgroupID, a.Netns)
		if netnsKind(a.Netns) == netnsPrivate {
			m.Enforcement.Network.Scope = fmt.Sprintf("netns (private: everything it sends; denials of cgroupv2 %s (id %d) counted apart)", s.CgroupPath, s.CgroupID)
		}
	}
	// Abstract AF_UNIX sockets live in the netns and no nftables hook
	// sees them: isolated only when the netns is the container's own.
	m.Enforcement.Network.AbstractUnix = spec.AbstractUnixNotEnforced
	if netnsKind(a.Netns) == netnsPrivate {
		m.Enforcement.Network.AbstractUnix = spec.AbstractUnixNetns
	} else {
		m.Enforcement.NotEnforced = append(m.Enforcement.NotEnforced, notEnforcedAbstractUnix(a.Netns),
			"processes outside the bound cgroup: in the shared "+a.Netns+" netns the table matches the container's cgroup; the container cannot leave it (its own cgroup namespace, no writable cgroupfs), but a process the host moves out is found by polling (policy_unbound, observation.escapes), not stopped")
	}
	m.Enforcement.NotEnforced = append(m.Enforcement.NotEnforced,
		"exec'd programs: each exec is admitted by the capability policy and bound by the table, but its program is not part of the observation the contract was chosen for",
		"the image's other files: the observation hashes the entrypoint's bytes; the libraries, interpreter and data it loads from the image are not hashed (mounts over them are refused)")
	if a.Seccomp != nil {
		m.Enforcement.Seccomp = a.Seccomp
	}
	m.Enforcement.ExecNoNewPrivileges = true
	effect.Admission(m, a.AdmissionDecision, x.started)
	m.Deadlines.Exceeded = x.deadline
	if len(a.CapabilitiesRemoved) > 0 {
		// admission.json names the sets; the manifest names the capability.
		m.Enforcement.CapabilitiesRemoved = []string{capNetRaw}
	}
	if x.status != nil {
		m.ExitStatus = *x.status
	}
	switch c := x.counters; {
	case c != nil:
		m.Observation.Counters = effect.Counters(netpolicy.Counters{Allowed: c.Allowed, AllowedOutside: c.AllowedOutside,
			Denied: c.Denied, DeniedKernel: c.DeniedKernel, DeniedOutside: c.DeniedOutside})
	case x.countErr != "":
		m.Observation.Counters.Error = x.countErr
	case a.Table != "":
		m.Observation.Counters.Error = "not read: the task never ran"
	}
	if c := x.counters; c != nil && len(op.contract.Network.Serve) > 0 {
		sv := &spec.Served{Packets: c.Served.Packets, Bytes: c.Served.Bytes, Connections: c.ServedConnections}
		for _, p := range c.ServeCounts {
			sv.Ports = append(sv.Ports, spec.ServedCount{Proto: netpolicy.ProtoName(p.Port.Proto), Port: int(p.Port.Port),
				Packets: p.Count.Packets, Bytes: p.Count.Bytes})
		}
		m.Observation.Served = sv
	}
	// Complete only when every denied packet the table counted was heard
	// and listed: an empty list never claims that nothing was tried.
	m.Observation.DeniedAttempts = x.attempts
	m.Observation.Escapes = x.escapes
	m.Enforcement.Network.Status = spec.NetworkEnforced
	if len(x.escapes) > 0 && netnsKind(a.Netns) != netnsPrivate {
		// In a shared netns the rules match the bound cgroup only: a
		// process outside it was not confined by this table.
		m.Enforcement.Network.Status = spec.NetworkEscapeDetected
	}
	effect.Gate(m, x.gateRan, x.gate.res, x.gate.err, x.drainErr)
	return m
}

// notEnforcedAbstractUnix says, for a shared netns, what abstract AF_UNIX
// sockets leave open.
func notEnforcedAbstractUnix(netns string) string {
	return "abstract AF_UNIX sockets: the container shares the " + netns + " network namespace, whose abstract socket names (@name) nftables cannot see; a process there listening on one is reachable from the container"
}
