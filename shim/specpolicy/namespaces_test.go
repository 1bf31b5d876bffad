package specpolicy

import (
	"reflect"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
)

func TestReadNamespaces(t *testing.T) {
	ns := func(list ...specs.LinuxNamespace) *specs.Spec {
		return &specs.Spec{Linux: &specs.Linux{Namespaces: list}}
	}
	netPath := specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/var/run/netns/n"}
	userPath := specs.LinuxNamespace{Type: specs.UserNamespace, Path: "/proc/9/ns/user"}
	for _, tc := range []struct {
		name string
		s    *specs.Spec
		want Namespaces
	}{
		{"no linux", &specs.Spec{}, Namespaces{Netns: spec.NetnsHost}},
		{"no network entry", ns(specs.LinuxNamespace{Type: specs.PIDNamespace}), Namespaces{Netns: spec.NetnsHost}},
		{"private", ns(specs.LinuxNamespace{Type: specs.NetworkNamespace}, specs.LinuxNamespace{Type: specs.CgroupNamespace}),
			Namespaces{Netns: spec.NetnsPrivate, Cgroup: true}},
		{"joined", ns(specs.LinuxNamespace{Type: specs.PIDNamespace}, netPath, userPath),
			Namespaces{Netns: spec.NetnsPath, NetnsPath: netPath.Path, User: true, UserPath: userPath.Path,
				Joined: []JoinedNamespace{{1, netPath}, {2, userPath}}}},
		{"own user namespace, joined cgroup", ns(specs.LinuxNamespace{Type: specs.UserNamespace}, specs.LinuxNamespace{Type: specs.CgroupNamespace, Path: "/proc/1/ns/cgroup"}),
			Namespaces{Netns: spec.NetnsHost, User: true, Cgroup: true, CgroupPath: "/proc/1/ns/cgroup",
				Joined: []JoinedNamespace{{1, specs.LinuxNamespace{Type: specs.CgroupNamespace, Path: "/proc/1/ns/cgroup"}}}}},
		{"twice: the last says", ns(netPath, specs.LinuxNamespace{Type: specs.NetworkNamespace}),
			Namespaces{Netns: spec.NetnsPrivate, Joined: []JoinedNamespace{{0, netPath}}}},
	} {
		if got := ReadNamespaces(tc.s); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if f := (JoinedNamespace{Index: 3}).Field(); f != "linux.namespaces[3].path" {
		t.Errorf("Field = %q", f)
	}
}
