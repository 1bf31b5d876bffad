package service

import (
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/spec"
)

// notEnforcedShim are what the shim leaves open in every container's
// manifest, beside what the engine says of a shared netns.
var notEnforcedShim = []string{
	"exec'd programs: each exec is admitted by the capability policy and bound by the table, but its program is not part of the observation the contract was chosen for",
	"the image's other files: the observation hashes the entrypoint's bytes; the libraries, interpreter and data it loads from the image are not hashed (mounts over them are refused)",
}

// manifest is the operation's effect manifest (engine.Manifest) with what
// the shim enforces itself: no_new_privs on every exec, and CAP_NET_RAW
// removed from the spec and from the execs that asked for it.
func (op *operation) manifest(x engine.Facts) *spec.Manifest {
	d := engine.Door{Namespace: op.namespace, ContainerID: op.containerID, Subject: "container", Admission: op.admission,
		Confined: "its own cgroup namespace, no writable cgroupfs", NotEnforced: notEnforcedShim,
		ExecNoNewPrivileges: true, CapabilitiesRemovedExecs: int(op.capExecs.Load())}
	if len(op.admission.CapabilitiesRemoved) > 0 || d.CapabilitiesRemovedExecs > 0 {
		// admission.json names the sets; the manifest names the
		// capability, removed from the spec and from that many execs.
		d.CapabilitiesRemoved = []string{capNetRaw}
	}
	return engine.Manifest(op.store, d, x)
}
