package service

import "testing"

func TestAnnotationPerContainer(t *testing.T) {
	a := map[string]string{
		AnnotationInference:                  "pod-wide",
		AnnotationInference + ".app":         "for-app",
		AnnotationContainerName:              "app",
		AnnotationInference + ".sidecar":     "for-sidecar",
		AnnotationObservation + ".unrelated": "x",
	}
	if got := annotation(CRINamespace, a, AnnotationInference); got != "for-app" {
		t.Errorf("k8s.io container app: %q, want its own key", got)
	}
	if got := annotation("builds", a, AnnotationInference); got != "pod-wide" {
		t.Errorf("outside k8s.io the per-container key is never read: %q", got)
	}
	a[AnnotationContainerName] = "other"
	if got := annotation(CRINamespace, a, AnnotationInference); got != "pod-wide" {
		t.Errorf("container without its own key: %q, want the pod-wide one", got)
	}
	delete(a, AnnotationContainerName) // the pause container has no container name
	if got := annotation(CRINamespace, a, AnnotationInference); got != "pod-wide" {
		t.Errorf("sandbox: %q", got)
	}
}
