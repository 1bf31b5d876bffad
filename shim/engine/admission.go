package engine

import (
	"time"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// Admission fills what every front door's manifest says of its admission:
// the contract and catalog, the observation and command digests (and the
// volatile env left out of the latter), how the contract was chosen, and
// the deadlines in force (the task's counted from started, when the
// subject started). Deadlines.Exceeded is the caller's.
func Admission(m *spec.Manifest, r admission.Recorded, started time.Time) {
	m.Contract = spec.ContractRef{ID: r.ContractID, Digest: r.ContractDigest}
	m.CatalogVersion = r.CatalogVersion
	m.ObservationDigest = r.ObservationDigest
	m.CommandDigest = r.Observation.CommandDigest
	m.VolatileEnv = r.Observation.VolatileEnv
	m.Inference = spec.InferenceSummary{SafeDefault: r.SafeDefault, Reason: r.FallbackFrom, Source: inferenceSource(r)}
	if a := r.Analyzer; a != nil && a.Outcome != spec.ConsultAnswered {
		m.Inference.AnalyzerOutcome = a.Outcome
	}
	m.Deadlines.Task = r.Contract.Deadline
	m.Deadlines.CatalogExpiresAt = r.CatalogExpiresAt
	if inf := r.Inference; inf != nil {
		m.Inference.Analyzer, m.Inference.Model = inf.Analyzer, inf.Model
		m.Inference.Class, m.Inference.ConfidenceBP = inf.Class, inf.ConfidenceBP
		m.Deadlines.InferenceExpiresAt = inf.ExpiresAt
	}
	if d, err := r.Contract.DeadlineDuration(); err == nil && d > 0 && !started.IsZero() {
		m.Deadlines.TaskExpiresAt = started.Add(d).UTC()
	}
}

// inferenceSource is where r's inference came from: the analyzer when the
// runtime asked one (no inference was attached), the caller's annotation
// when one was verified or weighed and fell back, "" when there was none.
func inferenceSource(r admission.Recorded) string {
	switch {
	case r.Analyzer != nil:
		return spec.InferenceFromAnalyzer
	case r.Inference != nil || r.FallbackFrom != "" && r.FallbackFrom != string(admission.ReasonNoInference):
		return spec.InferenceFromAnnotation
	}
	return ""
}

// Counters is the manifest's aggregate of a table's counters: every packet
// it allowed and every one it dropped, in the bound cgroup and outside it.
func Counters(c netpolicy.Counters) spec.Counters {
	return spec.Counters{
		AllowedPackets: c.Allowed.Packets + c.AllowedOutside.Packets,
		AllowedBytes:   c.Allowed.Bytes + c.AllowedOutside.Bytes,
		DeniedPackets:  c.Denied.Packets + c.DeniedKernel.Packets + c.DeniedOutside.Packets,
		DeniedBytes:    c.Denied.Bytes + c.DeniedKernel.Bytes + c.DeniedOutside.Bytes,
	}
}
