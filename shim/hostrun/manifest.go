package hostrun

import (
	"time"

	"github.com/gensee/gensee/shim/effect"
	"github.com/gensee/gensee/spec"
)

// exitFacts is what the exit path learned, in the order it learned it:
// effect.Exit's part as every front door learns it, and the host run's own.
type exitFacts struct {
	effect.Exit
	status    uint32
	started   time.Time
	writables []string
}

// manifest assembles a host run's effect manifest. Like the shim's, it
// claims only what a control enforced (the read-back table scoped to the
// run's cgroup, the dropped privileges, the read-only mounts) or what was
// observed (counters, attempts, the gate's reading of the upper dir).
func (r *run) manifest(x exitFacts) *spec.Manifest {
	a := r.adm
	c := r.contract
	m := &spec.Manifest{
		Schema:      spec.SchemaManifest,
		OperationID: r.id,
		Namespace:   Namespace,
		ContainerID: r.id,
		Host: &spec.HostRun{Runtime: Runtime, User: r.cmd.User.Name, UID: r.cmd.User.UID, GID: r.cmd.User.GID,
			Workspace: r.cmd.Workspace, Writable: x.writables, NoNewPrivileges: true, Capabilities: []string{}},
		Enforcement: spec.Enforcement{
			Network: spec.NetworkEnforcement{Mechanism: "nftables", Mode: c.Network.Mode, Loopback: c.Network.Loopback,
				Table: a.Table, Allow: c.Network.Allow, Status: spec.NetworkEnforced,
				AbstractUnix: spec.AbstractUnixNotEnforced},
			ExecNoNewPrivileges: true,
			// The command runs as the invoking user with every set emptied.
			CapabilitiesRemoved: []string{"ALL (bounding, permitted, effective, inheritable, ambient)"},
			NotEnforced: []string{effect.NotEnforcedAbstractUnix("command", "host"),
				effect.NotEnforcedOutsideCgroup("command", "host", "it holds no capability, and moving a process takes write access to a common ancestor's cgroup.procs, which is root's"),
				"socket families nftables cannot see (AF_PACKET, AF_VSOCK, ...): not filtered by seccomp for host runs; the command holds no capability, so AF_PACKET and raw sockets are refused by the kernel"},
		},
		ExitStatus: x.status,
	}
	if s := a.Subject; s != nil {
		effect.Bound(m, *s, "host", false)
	}
	effect.Admission(m, a.AdmissionDecision, x.started)
	// The host netns is shared: the rules match the run's cgroup only.
	effect.Exited(m, x.Exit, true)
	return m
}
