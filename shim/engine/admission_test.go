package engine

import (
	"testing"
	"time"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

func TestAdmission(t *testing.T) {
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	r := admission.Recorded{ContractID: "c", ContractDigest: "sha256:x", CatalogVersion: 3, CatalogExpiresAt: exp,
		Contract: spec.Contract{ID: "c", Deadline: "15m"}, ObservationDigest: "sha256:o",
		Observation: spec.Observation{CommandDigest: "sha256:cmd"},
		Inference:   &admission.InferenceSummary{Analyzer: "a", Model: "m", Class: "build", ConfidenceBP: 9300, ExpiresAt: exp}}
	started := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var m spec.Manifest
	Admission(&m, r, started)
	if m.Contract.ID != "c" || m.CatalogVersion != 3 || m.CommandDigest != "sha256:cmd" || m.Inference.Class != "build" ||
		m.Deadlines.Task != "15m" || !m.Deadlines.TaskExpiresAt.Equal(started.Add(15*time.Minute)) || !m.Deadlines.InferenceExpiresAt.Equal(exp) {
		t.Fatalf("manifest %+v", m)
	}
	var never spec.Manifest
	Admission(&never, r, time.Time{})
	if !never.Deadlines.TaskExpiresAt.IsZero() {
		t.Errorf("a subject that never started has a task deadline: %v", never.Deadlines.TaskExpiresAt)
	}
}

func TestCounters(t *testing.T) {
	c := Counters(netpolicy.Counters{Allowed: netpolicy.Count{Packets: 1, Bytes: 10}, AllowedOutside: netpolicy.Count{Packets: 2, Bytes: 20},
		Denied: netpolicy.Count{Packets: 3, Bytes: 30}, DeniedKernel: netpolicy.Count{Packets: 4, Bytes: 40}, DeniedOutside: netpolicy.Count{Packets: 5, Bytes: 50}})
	if c != (spec.Counters{AllowedPackets: 3, AllowedBytes: 30, DeniedPackets: 12, DeniedBytes: 120}) {
		t.Fatalf("counters %+v", c)
	}
}

func TestAdmissionSource(t *testing.T) {
	inf := &admission.InferenceSummary{Analyzer: "a", Model: "m", Class: "build", ConfidenceBP: 9300}
	asked := func(outcome string) *spec.AnalyzerConsult {
		return &spec.AnalyzerConsult{Analyzer: "a", Endpoint: "/run/a.sock", Outcome: outcome}
	}
	cases := []struct {
		name            string
		r               admission.Recorded
		source, outcome string
	}{
		{"annotation", admission.Recorded{Inference: inf}, spec.InferenceFromAnnotation, ""},
		{"annotation fell back", admission.Recorded{SafeDefault: true, FallbackFrom: "expired", Inference: inf}, spec.InferenceFromAnnotation, ""},
		{"bad annotation fell back", admission.Recorded{SafeDefault: true, FallbackFrom: "inference_malformed"}, spec.InferenceFromAnnotation, ""},
		{"none", admission.Recorded{SafeDefault: true, FallbackFrom: "no_inference"}, "", ""},
		{"analyzer", admission.Recorded{Inference: inf, Analyzer: asked(spec.ConsultAnswered)}, spec.InferenceFromAnalyzer, ""},
		{"analyzer timed out", admission.Recorded{SafeDefault: true, FallbackFrom: "analyzer_unavailable", Analyzer: asked(spec.ConsultTimeout)}, spec.InferenceFromAnalyzer, spec.ConsultTimeout},
		{"analyzer rejected", admission.Recorded{SafeDefault: true, FallbackFrom: "expired", Inference: inf, Analyzer: asked(spec.ConsultRejected)}, spec.InferenceFromAnalyzer, spec.ConsultRejected},
	}
	for _, tc := range cases {
		var m spec.Manifest
		tc.r.Observation = spec.Observation{CommandDigest: "sha256:cmd", VolatileEnv: []string{"HOSTNAME"}}
		Admission(&m, tc.r, time.Time{})
		if m.Inference.Source != tc.source || m.Inference.AnalyzerOutcome != tc.outcome || len(m.VolatileEnv) != 1 {
			t.Errorf("%s: source %q outcome %q volatile %v; want %q %q", tc.name, m.Inference.Source, m.Inference.AnalyzerOutcome, m.VolatileEnv, tc.source, tc.outcome)
		}
	}
}
