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
// unconfined: an explicit profile is merged, never dropped. noX32 (the
// host has no x32 ABI) leaves the profile's x32 section out. It never
// modifies s.
func admitSeccomp(s *specs.Spec, noX32 bool) (*specs.LinuxSeccomp, Seccomp, error) {
	var old *specs.LinuxSeccomp
	if s.Linux != nil {
		old = s.Linux.Seccomp
	}
	created := old == nil
	if created {
		old = runtimeDefault(s)
	}
	merged, rec, err := mergeSeccomp(old)
	if err != nil {
		return nil, rec, err
	}
	rec.Created = created
	if noX32 {
		dropX32(merged, &rec)
	}
	return merged, rec, nil
}

// dropX32 leaves the x32 ABI out of merged, a profile of this call's own,
// on a kernel without it: its syscalls (x86_64 numbers with bit 30 set)
// fail there with ENOSYS whatever the filter says, and would get the
// filter's bad-arch action instead. Only the kernel's answer to an x32
// call changes, from ENOSYS to the bad-arch action; runc no longer
// compiles a second copy of every rule.
func dropX32(merged *specs.LinuxSeccomp, rec *Seccomp) {
	if !slices.Contains(merged.Architectures, specs.ArchX32) {
		return
	}
	merged.Architectures = slices.DeleteFunc(merged.Architectures, func(a specs.Arch) bool { return a == specs.ArchX32 })
	rec.ArchitecturesRemoved = append(rec.ArchitecturesRemoved, string(specs.ArchX32))
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
