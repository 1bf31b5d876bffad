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
