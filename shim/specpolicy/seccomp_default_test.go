package specpolicy

import (
	"reflect"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestNoProfileGetsRuntimeDefault: a spec without a profile gets
// containerd's default profile for its capabilities, merged with the
// family rules, exactly as a spec that named RuntimeDefault would: no
// default-allow, no unshare or mount without CAP_SYS_ADMIN.
func TestNoProfileGetsRuntimeDefault(t *testing.T) {
	s := ctrDefaultSpec(t)
	if s.Linux.Seccomp != nil {
		t.Fatal("ctr's default spec has a profile")
	}
	res, err := CheckSpec(s, Grants{}, Operator{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Seccomp.Created {
		t.Error("Created not recorded")
	}
	named := ctrDefaultSpec(t)
	named.Linux.Seccomp = seccomp.DefaultProfile(named)
	if _, err := CheckSpec(named, Grants{}, Operator{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Linux.Seccomp, named.Linux.Seccomp) {
		t.Error("the profile given to a spec without one differs from RuntimeDefault's merge")
	}
	p := s.Linux.Seccomp
	if p.DefaultAction == specs.ActAllow {
		t.Fatal("default-allow")
	}
	for _, sc := range p.Syscalls {
		if sc.Action == specs.ActAllow && (slices.Contains(sc.Names, "unshare") || slices.Contains(sc.Names, "mount") || slices.Contains(sc.Names, "setns")) {
			t.Errorf("allowed without CAP_SYS_ADMIN: %v", sc.Names)
		}
	}
	// Without a capabilities object the profile is made for the default
	// set admission gives the process.
	nocaps := ctrDefaultSpec(t)
	nocaps.Process.Capabilities = nil
	if _, err := CheckSpec(nocaps, Grants{}, Operator{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(nocaps.Linux.Seccomp, named.Linux.Seccomp) {
		t.Error("no capabilities object: another profile than the default set's")
	}
}

// TestNoX32ABILeavesX32Out: on a host without the x32 ABI, the profile a
// spec gets (its own or RuntimeDefault) has no x32 section, recorded;
// every rule is unchanged. Elsewhere the section stays.
func TestNoX32ABILeavesX32Out(t *testing.T) {
	for _, named := range []bool{false, true} {
		with, without := ctrDefaultSpec(t), ctrDefaultSpec(t)
		if named {
			with.Linux.Seccomp = seccomp.DefaultProfile(with)
			without.Linux.Seccomp = seccomp.DefaultProfile(without)
		}
		resWith, err := CheckSpec(with, Grants{}, Operator{})
		if err != nil {
			t.Fatal(err)
		}
		resWithout, err := CheckSpec(without, Grants{}, Operator{NoX32ABI: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(with.Linux.Seccomp.Architectures, specs.ArchX32) {
			t.Fatalf("named %v: the x32 section is gone where the host may have x32: %v", named, with.Linux.Seccomp.Architectures)
		}
		if slices.Contains(resWith.Seccomp.ArchitecturesRemoved, string(specs.ArchX32)) {
			t.Errorf("named %v: x32 recorded as removed where it stayed", named)
		}
		if slices.Contains(without.Linux.Seccomp.Architectures, specs.ArchX32) {
			t.Errorf("named %v: NoX32ABI kept the x32 section: %v", named, without.Linux.Seccomp.Architectures)
		}
		if !slices.Contains(resWithout.Seccomp.ArchitecturesRemoved, string(specs.ArchX32)) {
			t.Errorf("named %v: x32's removal not recorded: %v", named, resWithout.Seccomp.ArchitecturesRemoved)
		}
		if !reflect.DeepEqual(with.Linux.Seccomp.Syscalls, without.Linux.Seccomp.Syscalls) || with.Linux.Seccomp.DefaultAction != without.Linux.Seccomp.DefaultAction {
			t.Errorf("named %v: leaving x32 out changed the rules", named)
		}
	}
}
