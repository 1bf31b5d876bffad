package specpolicy

import (
	"slices"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// admitSeccomp is the profile CheckSpec gives the spec: its own merged
// with the family rules (mergeSeccomp), or, when it has none, containerd's
// default profile (RuntimeDefault, what PSS baseline requires) merged the
// same way. A spec without a profile would otherwise run default-allow:
// unshare -U -r then holds every capability over new network and mount
// namespaces, the kernel surface RuntimeDefault closes. There is no
// unconfined: an explicit profile is merged, never dropped. It never
// modifies s.
func admitSeccomp(s *specs.Spec) (*specs.LinuxSeccomp, Seccomp, error) {
	var old *specs.LinuxSeccomp
	if s.Linux != nil {
		old = s.Linux.Seccomp
	}
	if old != nil {
		return mergeSeccomp(old)
	}
	merged, rec, err := mergeSeccomp(runtimeDefault(s))
	rec.Created = true
	return merged, rec, err
}

// RuntimeDefault is containerd's default profile for a process with the
// default bounding set: what a front door that cannot edit the spec (OCI
// hooks) hands the operator as the base of its profile when the operator
// names none, so a container there runs as a spec without a profile does
// under the shim.
func RuntimeDefault() *specs.LinuxSeccomp { return runtimeDefault(&specs.Spec{}) }

// runtimeDefault is containerd's default profile for s's process, whose
// syscall allowances follow its bounding set: CheckSpec's (the default set
// when the spec names none, as admission then sets).
func runtimeDefault(s *specs.Spec) *specs.LinuxSeccomp {
	sp := *s
	p := specs.Process{}
	if s.Process != nil {
		p = *s.Process
	}
	if p.Capabilities == nil {
		p.Capabilities = &specs.LinuxCapabilities{Bounding: slices.Clone(Default)}
	}
	sp.Process = &p
	return seccomp.DefaultProfile(&sp)
}
