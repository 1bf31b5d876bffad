package service

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/spec"
)

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

// completeFixture is an admission whose observation is pending: a rootfs
// with one executable, a catalog whose selector admits by safe_default.
func completeFixture(t *testing.T) (*admitted, string) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "app"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	oci := &specs.Spec{Process: &specs.Process{Args: []string{"/bin/app"}, Cwd: "/"}}
	p, err := observe.Prepare(root, oci)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cat := &spec.Catalog{Schema: spec.SchemaCatalog, Version: 3, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour),
		Contracts: map[string]spec.Contract{
			"offline": {ID: "offline", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}},
			"other":   {ID: "other", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}},
		},
		Selectors: []spec.Selector{{ID: "builds", Match: spec.SelectorMatch{ContainerdNamespace: "builds"}, SafeDefault: "offline"}},
	}
	in := admission.Input{Catalog: cat, CatalogVersion: 3, Facts: admission.Facts{ContainerdNamespace: "builds", Runtime: RuntimeName},
		Observation: p.Partial(), Now: now}
	adm := &admitted{decision: admission.Decide(in), pending: p, input: in}
	if !adm.decision.Admitted {
		t.Fatalf("provisional decision: %+v", adm.decision)
	}
	return adm, filepath.Join(root, "bin", "app")
}

// complete hashes the pending observation and keeps the decision, now
// naming the observation's digest; a decision that would differ with the
// hash refuses the task.
func TestAdmittedComplete(t *testing.T) {
	adm, exe := completeFixture(t)
	if err := adm.complete(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("#!/bin/sh\n"))
	if adm.pending != nil || adm.decision.Observation.ExecutableSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("observation %+v (pending %v), want %s's hash", adm.decision.Observation, adm.pending, exe)
	}
	if want, _ := adm.decision.Observation.Digest(); adm.decision.ObservationDigest != want || want == "" || adm.decision.ContractID != "offline" {
		t.Fatalf("decision %+v, digest %q", adm.decision, want)
	}
	if err := adm.complete(); err != nil {
		t.Fatalf("second complete: %v", err)
	}

	adm, _ = completeFixture(t)
	adm.decision.ContractID = "other" // created under another contract than the hash gives
	if rf, ok := spec.AsRefusal(adm.complete()); !ok || rf.Reason != "observation" || !strings.Contains(rf.Message, "differs") {
		t.Fatalf("complete of a differing decision = %v, want an observation refusal", rf)
	}
}

// isRefusal reports whether err is a refusal for reason.
func isRefusal(err error, reason string) bool {
	rf, ok := spec.AsRefusal(err)
	return ok && rf.Reason == reason
}

// A shim message that starts with a config.json path gives the refusal its
// Field; a rolled-back refusal keeps its sentence and says so.
func TestRefuseField(t *testing.T) {
	for msg, want := range map[string]string{
		"linux.cgroupsPath /a names an existing cgroup":   "linux.cgroupsPath",
		"linux.namespaces[2].path \"/p\" (network): gone": "linux.namespaces[2].path",
		"root.path /x: no such file":                      "root.path",
		"mounts[3]: bind":                                 "mounts[3]",
		"the task's stdout \"x\" is not allowed":          "",
		"linuxish text":                                   "",
	} {
		if rf := refuse("r", "%s", msg); rf.Field != want || rf.Message != msg {
			t.Errorf("refuse(%q) = field %q message %q, want field %q", msg, rf.Field, rf.Message, want)
		}
	}
	rf := spec.Refuse("observation", "process.args", "create the task again", "the decision differs")
	if got, want := rolledBack(rf).Error(), rf.Error()+"; task rolled back"; got != want || rf.Fix != "create the task again" {
		t.Errorf("rolledBack = %q, want %q (and rf unchanged: %q)", got, want, rf.Fix)
	}
	if got := rolledBack(refuse("r", "m")).Error(); got != spec.RefusalPrefix+"r: m; task rolled back" {
		t.Errorf("rolledBack without a fix = %q", got)
	}
}
