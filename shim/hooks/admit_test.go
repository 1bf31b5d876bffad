package hooks

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
)

// TestNamespaces: the door's rules over specpolicy.ReadNamespaces.
func TestNamespaces(t *testing.T) {
	withNS := func(list ...specs.LinuxNamespace) *specs.Spec {
		return &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{Namespaces: list}}
	}
	own := []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.CgroupNamespace}}
	for _, tc := range []struct {
		name          string
		s             *specs.Spec
		kind          spec.NetnsKind
		path          string
		reason, field string
	}{
		{name: "no process", s: &specs.Spec{}, reason: "no_process", field: "process"},
		{name: "private", s: withNS(append(own, specs.LinuxNamespace{Type: specs.NetworkNamespace})...), kind: spec.NetnsPrivate},
		{name: "host network", s: withNS(own...), kind: spec.NetnsHost},
		{name: "netns and uts by path", s: withNS(append(own, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/run/netns/n"}, specs.LinuxNamespace{Type: specs.UTSNamespace, Path: "/run/uts"})...),
			kind: spec.NetnsPath, path: "/run/netns/n"},
		{name: "a user namespace", s: withNS(append(own, specs.LinuxNamespace{Type: specs.UserNamespace})...), reason: ReasonUserns, field: "linux.namespaces"},
		{name: "a pid namespace by path", s: withNS(specs.LinuxNamespace{Type: specs.CgroupNamespace}, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: "/proc/1/ns/pid"}),
			reason: ReasonNamespacePath, field: "linux.namespaces[1].path"},
		{name: "no cgroup namespace", s: withNS(specs.LinuxNamespace{Type: specs.PIDNamespace}), reason: ReasonCgroupns, field: "linux.namespaces"},
	} {
		kind, path, rf := namespaces(tc.s)
		if tc.reason != "" {
			if rf == nil || rf.Reason != tc.reason || rf.Field != tc.field {
				t.Errorf("%s: %v, want %s at %s", tc.name, rf, tc.reason, tc.field)
			}
			continue
		}
		if rf != nil || kind != tc.kind || path != tc.path {
			t.Errorf("%s: %s %q %v, want %s %q", tc.name, kind, path, rf, tc.kind, tc.path)
		}
	}
}
