package service

import (
	"context"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/specpolicy"
)

// TestRuntimeStateDirs checks that a k3s containerd's root (containerd_root)
// and state (from the bundle path) are never bindable, read-only or not,
// nor any directory above them, as the stock /var/lib/containerd and
// /run/containerd are; a bundle not laid out by containerd adds no state.
func TestRuntimeStateDirs(t *testing.T) {
	const (
		root   = "/var/lib/rancher/k3s/agent/containerd"
		state  = "/run/k3s/containerd"
		bundle = state + "/io.containerd.runtime.v2.task/k8s.io/c1"
	)
	cfg := config.Default()
	cfg.ContainerdRoot = root
	dirs := runtimeStateDirs(cfg, bundle, "k8s.io", "c1")
	if want := []string{cfg.StateDir, root, state}; !slices.Equal(dirs, want) {
		t.Fatalf("runtimeStateDirs = %q, want %q", dirs, want)
	}
	if got := runtimeStateDirs(cfg, "/srv/bundles/c1", "k8s.io", "c1"); !slices.Equal(got, []string{cfg.StateDir, root}) {
		t.Errorf("a bundle outside containerd's layout: %q", got)
	}
	ctx := namespaces.WithNamespace(context.Background(), "default")
	for _, src := range []string{
		root,
		root + "/io.containerd.snapshotter.v1.overlayfs/snapshots",
		"/var/lib/rancher",
		bundle,
		state + "/io.containerd.runtime.v2.task/k8s.io/other/rootfs",
	} {
		spec, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c1"}, oci.WithDefaultUnixDevices,
			oci.WithMounts([]specs.Mount{{Source: src, Destination: "/mnt", Type: "bind", Options: []string{"bind", "ro"}}}))
		if err != nil {
			t.Fatal(err)
		}
		op := specpolicy.Operator{StateDirs: dirs, OOMScoreAdjFloor: -1000}
		if _, err := specpolicy.CheckSpec(spec, specpolicy.Grants{}, op); !isRefusal(err, specpolicy.RuleRuntimeSocket) {
			t.Errorf("a read-only bind of %s: %v, want %s", src, err, specpolicy.RuleRuntimeSocket)
		}
		if err := specpolicy.CheckRootPath(src, true, op); !isRefusal(err, specpolicy.RuleRuntimeSocket) {
			t.Errorf("root.path %s: %v, want %s", src, err, specpolicy.RuleRuntimeSocket)
		}
		// The operator's state_dir alone (before): the k3s root was bindable.
		op.StateDirs = []string{cfg.StateDir}
		if _, err := specpolicy.CheckSpec(spec, specpolicy.Grants{}, op); src == root && err != nil {
			t.Errorf("a read-only bind of %s with the state_dir alone: %v, want it admitted (the spec is otherwise admissible)", src, err)
		}
	}
}
