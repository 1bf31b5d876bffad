package hooks

import (
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/spec"
)

// notEnforcedHooks are what this front door leaves open that the shim
// closes; every manifest of a hook operation lists them.
var notEnforcedHooks = []string{
	"exec'd processes (podman exec): they join the container's cgroup and are bound by the table and the container's seccomp profile, but no hook runs for them: their capabilities are not admitted and no_new_privs is not forced",
	"exit status: an OCI hook is not told the init's exit status; exit_status 0 here says nothing",
	"exit ordering: the engine reports the container's exit before poststop runs; the manifest is written after it (podman run returns only after poststop)",
}

// manifest assembles the effect manifest. Like the shim's, it claims only
// what a control enforced (the installed, read-back table; the verified
// seccomp profile) or what was observed (counters, attempts, the gate's
// reading of the upperdir).
func (op *operation) manifest(x exitFacts) *spec.Manifest {
	a := op.adm
	c := a.Contract
	m := &spec.Manifest{
		Schema:      spec.SchemaManifest,
		OperationID: a.OperationID,
		Namespace:   Namespace,
		ContainerID: a.ContainerID,
		Enforcement: spec.Enforcement{
			Network: spec.NetworkEnforcement{Mechanism: "nftables", Mode: c.Network.Mode, Loopback: c.Network.Loopback,
				Table: a.Table, Allow: c.Network.Allow, Serve: c.Network.Serve, Status: spec.NetworkEnforced,
				AbstractUnix: spec.AbstractUnixNotEnforced},
			Seccomp:     a.Seccomp,
			NotEnforced: append([]string{}, notEnforcedHooks...),
		},
	}
	if s := a.Subject; s != nil {
		engine.Bound(m, *s, a.Netns, a.Netns == netnsPrivate)
	}
	if a.Netns == netnsPrivate {
		m.Enforcement.Network.AbstractUnix = spec.AbstractUnixNetns
	} else {
		m.Enforcement.NotEnforced = append(m.Enforcement.NotEnforced,
			engine.NotEnforcedAbstractUnix("container", a.Netns),
			engine.NotEnforcedOutsideCgroup("container", a.Netns, ""))
	}
	switch {
	case x.cleanup != "":
		m.Enforcement.NotEnforced = append(m.Enforcement.NotEnforced, x.cleanup)
	case !x.poststop:
		m.Enforcement.NotEnforced = append(m.Enforcement.NotEnforced,
			"poststop never came: the monitor finished the operation on its own after the container's init was gone")
	}
	engine.Admission(m, a.AdmissionDecision, op.ready)
	x.Findings, x.FindingsErr = events.Findings(op.store, op.req.OperationID)
	engine.Exited(m, x.Exit, a.Netns != netnsPrivate)
	return m
}
