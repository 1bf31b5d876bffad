package service

import (
	"context"
	"testing"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
)

// criAnnotations are what CRI sets on a pod's container.
var criAnnotations = map[string]string{
	AnnotationSandboxNamespace: "team-a", AnnotationSandboxName: "web-0",
	AnnotationSandboxUID: "5f1c", AnnotationContainerName: "app",
}

// TestKubernetesRef: the pod is named from CRI's annotations in CRI's
// namespace only, and only when they name one.
func TestKubernetesRef(t *testing.T) {
	want := spec.KubernetesRef{Namespace: "team-a", Pod: "web-0", PodUID: "5f1c", Container: "app"}
	if got := kubernetesRef(CRINamespace, &specs.Spec{Annotations: criAnnotations}); got == nil || *got != want {
		t.Fatalf("CRI container: %+v, want %+v", got, want)
	}
	for name, tc := range map[string]struct {
		ns  string
		oci *specs.Spec
	}{
		"another namespace": {"default", &specs.Spec{Annotations: criAnnotations}},
		"no spec":           {CRINamespace, nil},
		"no pod name":       {CRINamespace, &specs.Spec{Annotations: map[string]string{AnnotationSandboxNamespace: "team-a"}}},
	} {
		if got := kubernetesRef(tc.ns, tc.oci); got != nil {
			t.Errorf("%s: %+v, want none", name, got)
		}
	}
}

// TestRefusalRecordsPod: a refusal of a CRI container keeps the pod it
// was for in its refusals line (a node daemon posts the Event there).
func TestRefusalRecordsPod(t *testing.T) {
	ctx := namespaces.WithNamespace(context.Background(), CRINamespace)
	t.Cleanup(func() { waitGCReleased(t) })
	s, r, _, state := createFixture(t, &specs.Spec{Annotations: criAnnotations})
	if _, err := s.Create(ctx, r); err == nil {
		t.Fatal("a spec without a process was admitted")
	}
	lines := refusalLines(t, state)
	if len(lines) != 1 || lines[0].Kubernetes == nil || lines[0].Kubernetes.Pod != "web-0" || lines[0].Kubernetes.PodUID != "5f1c" {
		t.Fatalf("refusals log %+v, want one line naming pod team-a/web-0", lines)
	}
}
