package spec

import (
	"fmt"
	"slices"
)

// Size caps for runtime-written records read back by the CLI.
const (
	MaxManifestBytes = 16 << 20
	MaxEventBytes    = 16 << 10
)

// Validate checks a manifest's invariants: schema, operation id, digest
// formats, verdict values, and that it claims neither semantic verification
// nor promotion.
func (m *Manifest) Validate() error {
	p := newProblems()
	checkSchema(p, m.Schema, SchemaManifest)
	if m.OperationID == "" {
		p.add("operation_id", "is required")
	}
	if m.Contract.Digest != "" {
		checkDigest(p, "contract.digest", m.Contract.Digest)
	}
	if m.ObservationDigest != "" {
		checkDigest(p, "observation_digest", m.ObservationDigest)
	}
	if m.CommandDigest != "" {
		checkDigest(p, "command_digest", m.CommandDigest)
	}
	checkVolatileNames(p, m.VolatileEnv)
	checkBP(p, "inference.confidence_bp", m.Inference.ConfidenceBP)
	m.Inference.check(p)
	switch m.Gate.Verdict {
	case VerdictPass, VerdictFail, VerdictNotRun:
	default:
		p.addf("gate.verdict", "%q is not a verdict: use pass, fail or not_run", truncate(m.Gate.Verdict, 80))
	}
	for i, pr := range m.Products {
		if pr.Verdict != VerdictPass && pr.Verdict != VerdictFail {
			p.addf(joinKey(joinIndex("products", i), "verdict"), "%q is not a product verdict: use pass or fail", truncate(pr.Verdict, 80))
		}
		if pr.SHA256 != "" {
			checkHex64(p, joinKey(joinIndex("products", i), "sha256"), "sha256", pr.SHA256)
		}
		if pr.TreeDigest != "" {
			checkDigest(p, joinKey(joinIndex("products", i), "tree_digest"), pr.TreeDigest)
		}
	}
	if m.SemanticallyVerified {
		p.add("semantically_verified", "must be false: the gate checks structure, never meaning")
	}
	if m.Promoted {
		p.add("promoted", "must be false: gensee stages products and never promotes them")
	}
	return p.err()
}

// ParseManifest strictly decodes and validates a manifest.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := parse(data, &m, MaxManifestBytes, m.Validate); err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	return &m, nil
}

// ParseEvent strictly decodes and validates one events.jsonl line.
func ParseEvent(data []byte) (*Event, error) {
	var e Event
	if err := parse(data, &e, MaxEventBytes, e.Validate); err != nil {
		return nil, fmt.Errorf("parse event: %w", err)
	}
	return &e, nil
}

// check validates how an inference summary says the contract was chosen:
// a known source, and an analyzer outcome only from the analyzer.
func (in *InferenceSummary) check(p problems) {
	switch in.Source {
	case "", InferenceFromAnnotation, InferenceFromAnalyzer:
	default:
		p.addf("inference.source", "%q is not a source: use annotation or analyzer", truncate(in.Source, 80))
	}
	if in.AnalyzerOutcome == "" {
		return
	}
	if !slices.Contains(consultOutcomes, in.AnalyzerOutcome) || in.AnalyzerOutcome == ConsultAnswered {
		p.addf("inference.analyzer_outcome", "%q is not the outcome of an analyzer that gave no accepted inference", truncate(in.AnalyzerOutcome, 80))
	}
	if in.Source != InferenceFromAnalyzer {
		p.add("inference.analyzer_outcome", "is set only when the source is the analyzer")
	}
}

// consultOutcomes lists every AnalyzerConsult outcome.
var consultOutcomes = []string{ConsultAnswered, ConsultNoClass, ConsultTimeout, ConsultUnreachable, ConsultMalformed, ConsultRejected}
