package specpolicy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

func TestStateFromBundle(t *testing.T) {
	for _, tc := range []struct{ bundle, ns, id, want string }{
		{"/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1", "k8s.io", "c1", "/run/containerd"},
		{"/run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io/c1", "k8s.io", "c1", "/run/k3s/containerd"},
		{"/srv/ctrd/state/io.containerd.runtime.v2.task/k8s.io/c1", "k8s.io", "c1", "/srv/ctrd/state"},
		{"/run/containerd/io.containerd.runtime.v2.task/default/c1", "k8s.io", "c1", ""}, // another namespace
		{"/run/containerd/io.containerd.runtime.v2.task/k8s.io/c2", "k8s.io", "c1", ""},  // another task
		{"/io.containerd.runtime.v2.task/k8s.io/c1", "k8s.io", "c1", ""},                 // state would be /
		{"run/containerd/io.containerd.runtime.v2.task/k8s.io/c1", "k8s.io", "c1", ""},   // relative
		{"/run//containerd/io.containerd.runtime.v2.task/k8s.io/c1", "k8s.io", "c1", ""},
		{"/run/x/../containerd/io.containerd.runtime.v2.task/k8s.io/c1", "k8s.io", "c1", ""},
		{"/tmp/bundle", "k8s.io", "c1", ""},
		{"/run/containerd/io.containerd.runtime.v2.task/k8s.io/a/b", "k8s.io", "a/b", ""},
		{"/run/containerd/io.containerd.runtime.v2.task/k8s.io/", "k8s.io", "", ""},
	} {
		if got := StateFromBundle(tc.bundle, tc.ns, tc.id); got != tc.want {
			t.Errorf("StateFromBundle(%q, %q, %q) = %q, want %q", tc.bundle, tc.ns, tc.id, got, tc.want)
		}
	}
}

func TestCRISandboxDirs(t *testing.T) {
	const s = "/io.containerd.grpc.v1.cri/sandboxes"
	for _, tc := range []struct {
		root, state string
		want        []string
	}{
		{"", "", []string{"/var/lib/containerd" + s, "/run/containerd" + s, "/var/run/containerd" + s}},
		{"/var/lib/containerd", "/run/containerd", []string{"/var/lib/containerd" + s, "/run/containerd" + s}},
		{"/var/lib/rancher/k3s/agent/containerd", "/run/k3s/containerd", []string{"/var/lib/rancher/k3s/agent/containerd" + s, "/run/k3s/containerd" + s}},
		{"/var/lib/rancher/rke2/agent/containerd", "/run/k3s/containerd", []string{"/var/lib/rancher/rke2/agent/containerd" + s, "/run/k3s/containerd" + s}},
		{"relative", "/", nil},
	} {
		if got := CRISandboxDirs(tc.root, tc.state); !slices.Equal(got, tc.want) {
			t.Errorf("CRISandboxDirs(%q, %q) = %q, want %q", tc.root, tc.state, got, tc.want)
		}
	}
}

// isCRISandboxFile: the container's own sandbox's files under the dirs
// given, nothing else.
func TestIsCRISandboxFile(t *testing.T) {
	k3s := Operator{SandboxID: criSandbox, CRISandboxDirs: CRISandboxDirs("/var/lib/rancher/k3s/agent/containerd", "/run/k3s/containerd")}
	stock := Operator{SandboxID: criSandbox}
	const k3sRoot = "/var/lib/rancher/k3s/agent/containerd/io.containerd.grpc.v1.cri/sandboxes/"
	for _, tc := range []struct {
		src  string
		op   Operator
		want bool
	}{
		{k3sRoot + criSandbox + "/hosts", k3s, true},
		{k3sRoot + criSandbox + "/resolv.conf", k3s, true},
		{"/run/k3s/containerd/io.containerd.grpc.v1.cri/sandboxes/" + criSandbox + "/shm", k3s, true},
		{k3sRoot + criSandbox + "/hosts", stock, false}, // not this containerd's root
		{"/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/" + criSandbox + "/hosts", stock, true},
		{"/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/" + criSandbox + "/hosts", k3s, false},
		{k3sRoot + "another-pod/hosts", k3s, false},
		{k3sRoot + criSandbox + "/sandbox.json", k3s, false},
		{k3sRoot + criSandbox, k3s, false},
		{k3sRoot + criSandbox + "/../another-pod/hosts", k3s, false},
		{k3sRoot + criSandbox + "/hosts", Operator{CRISandboxDirs: k3s.CRISandboxDirs}, false}, // no sandbox id: outside CRI
		{k3sRoot + "../hosts", Operator{SandboxID: "..", CRISandboxDirs: k3s.CRISandboxDirs}, false},
	} {
		if got := isCRISandboxFile(tc.src, tc.op); got != tc.want {
			t.Errorf("isCRISandboxFile(%q, sandbox %q, dirs %q) = %v, want %v", tc.src, tc.op.SandboxID, tc.op.CRISandboxDirs, got, tc.want)
		}
	}
}

func TestIsCRIImageVolume(t *testing.T) {
	stock := Operator{SandboxID: criSandbox}
	k3s := Operator{SandboxID: criSandbox, CRISandboxDirs: CRISandboxDirs("/var/lib/rancher/k3s/agent/containerd", "/run/k3s/containerd")}
	const vols = "/run/containerd/io.containerd.grpc.v1.cri/image-volumes/"
	for _, tc := range []struct {
		src  string
		op   Operator
		want bool
	}{
		{vols + criSandbox + "/img1", stock, true},
		{vols + criSandbox + "/img1/sub/dir", stock, true}, // a subPath
		{"/run/k3s/containerd/io.containerd.grpc.v1.cri/image-volumes/" + criSandbox + "/img1", k3s, true},
		{vols + criSandbox + "/img1", k3s, false}, // not this containerd's state
		{vols + "another-pod/img1", stock, false}, // another pod's
		{vols + criSandbox, stock, false},         // the pod's whole directory
		{vols + criSandbox + "/../other/x", stock, false},
		{vols + criSandbox + "/img1", Operator{}, false}, // outside CRI
		{"/run/containerd/io.containerd.grpc.v1.cri/sandboxes/" + criSandbox + "/img1", stock, false},
	} {
		if got := isCRIImageVolume(tc.src, tc.op); got != tc.want {
			t.Errorf("isCRIImageVolume(%q, sandbox %q) = %v, want %v", tc.src, tc.op.SandboxID, got, tc.want)
		}
	}
}

// A k3s pod's container spec (CRI's binds under k3s's root and state) is
// admitted with k3s's dirs, and refused with the stock ones; another pod's
// files stay refused.
func TestCheckSpecK3sSandboxFiles(t *testing.T) {
	k3s := func() *Operator {
		return &Operator{WritableBindRoots: []string{"/var/lib/kubelet/pods"}, SandboxID: criSandbox, OOMScoreAdjFloor: -998,
			CRISandboxDirs: CRISandboxDirs("/var/lib/rancher/k3s/agent/containerd", "/run/k3s/containerd")}
	}
	cs := criContainerSpec(t)
	for i, m := range cs.Mounts {
		cs.Mounts[i].Source = strings.Replace(strings.Replace(m.Source, "/var/lib/containerd/", "/var/lib/rancher/k3s/agent/containerd/", 1), "/run/containerd/", "/run/k3s/containerd/", 1)
	}
	if _, err := CheckSpec(cs, Grants{}, *k3s()); err != nil {
		t.Fatalf("k3s pod spec with k3s dirs: %v", err)
	}
	stock := k3s()
	stock.CRISandboxDirs = nil
	var rf *spec.Refusal
	if _, err := CheckSpec(cs, Grants{}, *stock); !errors.As(err, &rf) || rf.Reason != RuleWritableHostPath {
		t.Errorf("k3s pod spec with the stock dirs: %v, want %s", err, RuleWritableHostPath)
	}
	other := k3s()
	other.SandboxID = "another-pod"
	if _, err := CheckSpec(cs, Grants{}, *other); !errors.As(err, &rf) {
		t.Errorf("another pod's files: %v, want a refusal", err)
	}
}
