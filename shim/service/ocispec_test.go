package service

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func specWith(ns ...specs.LinuxNamespace) *specs.Spec {
	return &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{Namespaces: ns}}
}

func TestNamespacesOfRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *specs.Spec
		rule string
	}{
		{"no process", &specs.Spec{}, "no_process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, rf := namespacesOf(tc.spec)
			if rf == nil || rf.Reason != tc.rule {
				t.Fatalf("refusal = %v, want rule %s", rf, tc.rule)
			}
		})
	}
}

func TestNamespacesOfKinds(t *testing.T) {
	if kind, _, _, _ := namespacesOf(specWith()); kind != netnsHost {
		t.Errorf("no netns entry: %s, want host", kind)
	}
	if kind, _, _, _ := namespacesOf(specWith(specs.LinuxNamespace{Type: specs.NetworkNamespace})); kind != netnsPrivate {
		t.Errorf("netns without path: %s, want private", kind)
	}
	kind, p, _, _ := namespacesOf(specWith(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/var/run/netns/x"}))
	if kind != netnsPath || p != "/var/run/netns/x" {
		t.Errorf("path netns: %s %s", kind, p)
	}
	_, _, u, err := namespacesOf(specWith(specs.LinuxNamespace{Type: specs.UserNamespace, Path: "/proc/9/ns/user"}, specs.LinuxNamespace{Type: specs.NetworkNamespace}))
	if err != nil || !u.has || u.path != "/proc/9/ns/user" {
		t.Errorf("user namespace: %+v %v, want admitted and recorded", u, err)
	}
}

func TestPrivateCgroupns(t *testing.T) {
	s := specWith(specs.LinuxNamespace{Type: specs.PIDNamespace})
	if n := privateCgroupns(s); n == "" || s.Linux.Namespaces[1].Type != specs.CgroupNamespace || s.Linux.Namespaces[1].Path != "" {
		t.Fatalf("host cgroupns: %q %+v", n, s.Linux.Namespaces)
	}
	if n := privateCgroupns(s); n != "" || len(s.Linux.Namespaces) != 2 {
		t.Fatalf("second pass changed the spec again: %q", n)
	}
}

func TestRefuseJoinedNamespaces(t *testing.T) {
	for _, tc := range []struct {
		ns   specs.LinuxNamespace
		rule string
	}{
		{specs.LinuxNamespace{Type: specs.MountNamespace, Path: "/proc/1/ns/mnt"}, "mount_ns_path"},
		{specs.LinuxNamespace{Type: specs.CgroupNamespace, Path: "/proc/self/ns/cgroup"}, "host_cgroupns"},
	} {
		if rf := refuseJoinedNamespaces(specWith(tc.ns)); rf == nil || rf.Reason != tc.rule || rf.Field != "linux.namespaces" {
			t.Errorf("%+v: %v, want %s at linux.namespaces", tc.ns, rf, tc.rule)
		}
	}
}

// Only a pid namespace runc makes (no path) is the container's own; the
// exit path starts on the init's pidfd only then.
func TestPrivatePidns(t *testing.T) {
	for _, c := range []struct {
		ns   []specs.LinuxNamespace
		want bool
	}{
		{[]specs.LinuxNamespace{{Type: specs.PIDNamespace}}, true},
		{[]specs.LinuxNamespace{{Type: specs.PIDNamespace, Path: "/proc/1/ns/pid"}}, false},
		{[]specs.LinuxNamespace{{Type: specs.NetworkNamespace}}, false},
	} {
		if got := privatePidns(&specs.Spec{Linux: &specs.Linux{Namespaces: c.ns}}); got != c.want {
			t.Errorf("%+v: %v, want %v", c.ns, got, c.want)
		}
	}
	if privatePidns(&specs.Spec{}) {
		t.Error("no linux section: private")
	}
}
