package engine

import (
	"path"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// fillGate fills m's products, verdict, violations, unclaimed and excluded
// from one gate run: ran false when the gate never ran, else its result or
// gateErr; a drain failure fails the verdict (a process may still write).
func fillGate(m *spec.Manifest, ran bool, r *gate.Result, gateErr, drainErr error) {
	switch {
	case !ran:
		m.Gate = spec.GateResult{Verdict: spec.VerdictNotRun}
		return
	case gateErr != nil:
		m.Gate = spec.GateResult{Verdict: spec.VerdictFail, Violations: []spec.Violation{{Rule: "gate_error", Detail: gateErr.Error()}}}
		return
	case r == nil:
		m.Gate = spec.GateResult{Verdict: spec.VerdictPass}
		return
	}
	m.Gate.Verdict = string(r.Verdict)
	if drainErr != nil {
		m.Gate.Verdict = spec.VerdictFail
		m.Gate.Violations = append(m.Gate.Violations, spec.Violation{Rule: "drain", Detail: drainErr.Error()})
	}
	for _, a := range r.Anomalies {
		m.Gate.Violations = append(m.Gate.Violations, spec.Violation{Path: a.Path, Rule: a.Rule, Detail: a.Detail})
	}
	for _, p := range r.Products {
		pr := spec.ProductRecord{Class: p.Class, Slot: p.Slot, Verdict: string(p.Verdict), Bytes: p.Bytes,
			SHA256: p.SHA256, TreeDigest: p.TreeDigest}
		if p.Staged != "" {
			// Recorded relative to the operation directory, which moves with it.
			pr.Staged = path.Join(record.StagedDir, p.Slot)
		}
		for _, e := range p.Entries {
			pr.Entries = append(pr.Entries, EntryRecord(e))
		}
		for _, v := range p.Violations {
			m.Gate.Violations = append(m.Gate.Violations, spec.Violation{Slot: p.Slot, Path: v.Path, Rule: v.Rule, Detail: v.Detail})
		}
		m.Products = append(m.Products, pr)
	}
	m.Unclaimed = spec.Unclaimed{Count: r.Unclaimed.Count, Digest: r.Unclaimed.Digest}
	m.Excluded = spec.Excluded{Count: r.Excluded.Entries + r.Excluded.MountStubs + r.Excluded.Baseline}
}

// EntryRecord is a gate entry as the manifest lists it.
func EntryRecord(e gate.Entry) spec.EntryRecord {
	return spec.EntryRecord{Op: e.Op, Path: e.Path, Type: e.Type, Mode: e.Mode, Size: e.Size, SHA256: e.SHA256, Target: e.Target}
}

// maxGateEvents bounds the gate_rejected events one exit emits; the
// manifest lists every violation.
const maxGateEvents = 20

// GateEvents are the gate_rejected events for a gate run's violations (a
// run that failed to give a result: one gate_error), at most maxGateEvents.
func GateEvents(r *gate.Result, gateErr error) []spec.Event {
	var vs []gate.Violation
	switch {
	case gateErr != nil:
		vs = []gate.Violation{{Rule: "gate_error", Detail: gateErr.Error()}}
	case r != nil:
		vs = append(vs, r.Anomalies...)
		for _, p := range r.Products {
			for _, v := range p.Violations {
				if v.Path == "" {
					v.Path = p.Slot
				}
				vs = append(vs, v)
			}
		}
	}
	var out []spec.Event
	for i, v := range vs {
		if i == maxGateEvents {
			break
		}
		out = append(out, spec.Event{Kind: spec.EventGateRejected, Control: "product_gate", Rule: v.Rule, Target: v.Path, Detail: v.Detail})
	}
	return out
}
