package hooks

import (
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/spec"
)

// notEnforcedHooks are what this front door leaves open that the shim
// closes; every manifest of a hook operation lists them.
var notEnforcedHooks = []string{
	"exec'd processes (podman exec): they join the container's cgroup and are bound by the table and the container's seccomp profile, but no hook runs for them: their capabilities are not admitted and no_new_privs is not forced",
	"exit status: an OCI hook is not told the init's exit status; exit_status 0 here says nothing",
	"exit ordering: the engine reports the container's exit before poststop runs; the manifest is written after it (podman run returns only after poststop)",
}

// manifest is the operation's effect manifest (engine.Manifest); end, when
// set, is how the operation ended that the door must say (poststop never
// came; a monitor that died, finished by a later hook).
func (op *operation) manifest(x engine.Facts, end string) *spec.Manifest {
	lines := notEnforcedHooks
	if end != "" {
		lines = append(append([]string{}, notEnforcedHooks...), end)
	}
	return engine.Manifest(op.store, engine.Door{Namespace: Namespace, ContainerID: op.adm.ContainerID, Subject: "container",
		Admission: &op.adm.Admission, NotEnforced: lines}, x)
}
