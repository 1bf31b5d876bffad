package service

import (
	"errors"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func specWith(caps []string, ns ...specs.LinuxNamespace) *specs.Spec {
	return &specs.Spec{
		Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
			Bounding: slices.Clone(caps), Effective: slices.Clone(caps), Permitted: slices.Clone(caps),
		}},
		Linux: &specs.Linux{Namespaces: ns},
	}
}

func TestHardenSpecRemovesNetRaw(t *testing.T) {
	s := specWith([]string{"CAP_CHOWN", "CAP_NET_RAW", "CAP_KILL"}, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	removed, kind, _, err := hardenSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	if kind != netnsPrivate {
		t.Errorf("kind = %s, want private", kind)
	}
	if !slices.Equal(removed, []string{"bounding", "effective", "permitted"}) {
		t.Errorf("removed from %v", removed)
	}
	for _, set := range [][]string{s.Process.Capabilities.Bounding, s.Process.Capabilities.Effective, s.Process.Capabilities.Permitted} {
		if slices.Contains(set, "CAP_NET_RAW") || !slices.Contains(set, "CAP_KILL") {
			t.Errorf("set after hardening: %v", set)
		}
	}
}

func TestHardenSpecRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *specs.Spec
		rule string
	}{
		{"net_admin", specWith([]string{"CAP_NET_ADMIN"}), "refused_capability"},
		{"sys_admin", specWith([]string{"CAP_SYS_ADMIN"}), "refused_capability"},
		{"bpf", specWith([]string{"CAP_BPF"}), "refused_capability"},
		{"userns", specWith(nil, specs.LinuxNamespace{Type: specs.UserNamespace}, specs.LinuxNamespace{Type: specs.NetworkNamespace}), "userns_owns_netns"},
		{"no process", &specs.Spec{}, "no_process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := hardenSpec(tc.spec)
			var r *specRefusal
			if !errors.As(err, &r) || r.Rule != tc.rule {
				t.Fatalf("err = %v, want rule %s", err, tc.rule)
			}
		})
	}
}

func TestHardenSpecNetnsKinds(t *testing.T) {
	_, kind, _, _ := hardenSpec(specWith(nil))
	if kind != netnsHost {
		t.Errorf("no netns entry: %s, want host", kind)
	}
	_, kind, p, _ := hardenSpec(specWith(nil, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/var/run/netns/x"}))
	if kind != netnsPath || p != "/var/run/netns/x" {
		t.Errorf("path netns: %s %s", kind, p)
	}
}
