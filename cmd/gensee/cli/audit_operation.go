package cli

import (
	"slices"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/spec"
)

// OperationAuditSchema identifies the JSON shape of boundary audit
// --operation --json.
const OperationAuditSchema = "gensee.operation-audit/v1"

// Finding classes, and the verdicts built from them.
const (
	// ClassHitAWall: a boundary refused something and held. A hint_loop is
	// here too, as a guidance gap: never a security finding.
	ClassHitAWall = "hit_a_wall"
	// ClassDefeated: a control_defeat signature fired: a security finding.
	ClassDefeated = "defeated_a_control"
	// ClassObserved: evidence the watchdog weighs (policy_unbound,
	// flow_reached, table_tampered, product_mismatch); not a finding on its
	// own — a signature that used it is its own finding.
	ClassObserved = "observed"

	VerdictNothing = "nothing_refused" // no wall hit, no control defeated
)

// OperationAudit is boundary audit --operation's result. writeJSON sorts
// the keys.
type OperationAudit struct {
	Schema      string             `json:"schema"`
	OperationID string             `json:"operation_id"`
	Container   string             `json:"container"` // namespace/id, "" if unknown
	Log         OperationLog       `json:"log"`
	Attention   bool               `json:"attention_set"`
	Findings    []OperationFinding `json:"findings"` // oldest first
	Counts      map[string]int     `json:"counts"`   // per class, every class present
	Verdict     string             `json:"verdict"`  // defeated_a_control | hit_a_wall | nothing_refused
	ExitCode    int                `json:"exit_code"`
	// Served is what the manifest recorded for the contract's served
	// ports; absent when it serves none or there is no manifest yet.
	Served *OperationServed `json:"served,omitempty"`
}

// OperationServed is network.serve as the manifest recorded it: the ports
// served and, once the task exited, what the table counted for them.
// Reporting only: it classifies nothing.
type OperationServed struct {
	Ports   []spec.ServeRule `json:"ports"`
	Counted *spec.Served     `json:"counted"` // nil: not counted (the counters were not read)
}

// servedOf is m's served section for the audit, nil when m serves nothing.
func servedOf(m *spec.Manifest) *OperationServed {
	if m == nil || (len(m.Enforcement.Network.Serve) == 0 && m.Observation.Served == nil) {
		return nil
	}
	return &OperationServed{Ports: append([]spec.ServeRule{}, m.Enforcement.Network.Serve...), Counted: m.Observation.Served}
}

// OperationLog says how much of the operation's events.jsonl the audit saw.
// Complete is false when events were dropped or lines did not parse: the
// classification covers only what was written.
type OperationLog struct {
	Present   bool   `json:"present"`
	Events    int    `json:"events"`
	Dropped   uint64 `json:"dropped"`
	Malformed int    `json:"malformed"`
	Complete  bool   `json:"complete"`
}

// OperationFinding is one classified finding: an event from the log, a
// finding from attention.json, or both when they are the same firing.
type OperationFinding struct {
	Class       string    `json:"class"`
	Security    bool      `json:"security"`     // true only for defeated_a_control
	GuidanceGap bool      `json:"guidance_gap"` // a hint_loop
	Kind        string    `json:"kind"`
	Control     string    `json:"control"`
	Rule        string    `json:"rule"` // the signature, for control_defeat
	Target      string    `json:"target"`
	Detail      string    `json:"detail"`
	Hint        string    `json:"hint"` // guidance only
	At          time.Time `json:"at"`
	Sources     []string  `json:"sources"`  // "events", "attention", "manifest"
	Evidence    []string  `json:"evidence"` // "kind target" of each evidence event (attention findings)
}

// classOf maps an event kind to its class.
func classOf(kind string) string {
	switch kind {
	case spec.EventControlDefeat:
		return ClassDefeated
	case spec.EventEgressDenied, spec.EventAdmissionDenied, spec.EventGateRejected,
		spec.EventCapabilityRemoved, spec.EventDeadlineExceeded, spec.EventHintLoop:
		return ClassHitAWall
	}
	return ClassObserved
}

// buildOperationAudit classifies an operation's events and attention
// findings. It is pure. A control_defeat event and an attention finding
// with the same signature and time are one firing, reported once.
//
// The manifest's findings (m may be nil) are the same firings again, kept
// after the task ended: an operation whose events and attention record
// were lost still audits as defeated from its manifest alone.
func buildOperationAudit(opID, container string, log events.Contents, logPresent bool, att spec.Attention, attSet bool, m *spec.Manifest) OperationAudit {
	rep := OperationAudit{
		Schema: OperationAuditSchema, OperationID: opID, Container: container, Attention: attSet && len(att.Open()) > 0,
		Log: OperationLog{Present: logPresent, Events: len(log.Events), Dropped: log.Dropped, Malformed: log.Malformed,
			Complete: log.Dropped == 0 && log.Malformed == 0},
		Findings: []OperationFinding{},
		Counts:   map[string]int{ClassHitAWall: 0, ClassDefeated: 0, ClassObserved: 0},
	}
	for _, e := range log.Events {
		e = events.Sanitize(e)
		rep.Findings = append(rep.Findings, OperationFinding{
			Class: classOf(e.Kind), Kind: e.Kind, Control: e.Control, Rule: e.Rule, Target: e.Target,
			Detail: e.Detail, Hint: e.Hint, At: e.At, Sources: []string{"events"}, Evidence: []string{},
		})
	}
	if attSet {
		for _, f := range att.Findings {
			rep.addFinding(f, "attention")
		}
	}
	if m != nil {
		for _, f := range m.Findings {
			rep.addFinding(f, "manifest")
		}
	}
	slices.SortStableFunc(rep.Findings, func(a, b OperationFinding) int { return a.At.Compare(b.At) })
	for i := range rep.Findings {
		f := &rep.Findings[i]
		f.Security = f.Class == ClassDefeated
		f.GuidanceGap = f.Kind == spec.EventHintLoop
		rep.Counts[f.Class]++
	}
	switch {
	case rep.Counts[ClassDefeated] > 0:
		rep.Verdict, rep.ExitCode = ClassDefeated, ExitDefeated
	case rep.Counts[ClassHitAWall] > 0:
		rep.Verdict, rep.ExitCode = ClassHitAWall, ExitOK
	default:
		rep.Verdict, rep.ExitCode = VerdictNothing, ExitOK
	}
	return rep
}

// addFinding merges finding f (from source: the attention record or the
// manifest) into the control_defeat event or finding of the same firing,
// or adds it when none has it (the log dropped it, the record is gone).
func (rep *OperationAudit) addFinding(f spec.Finding, source string) {
	ev := []string{}
	for _, e := range f.Evidence {
		e = events.Sanitize(e)
		ev = append(ev, strings.TrimSpace(e.Kind+" "+e.Target))
	}
	for i := range rep.Findings {
		g := &rep.Findings[i]
		if g.Kind == spec.EventControlDefeat && g.Rule == f.Signature && g.At.Equal(f.At) && !slices.Contains(g.Sources, source) {
			g.Sources = append(g.Sources, source)
			if len(g.Evidence) == 0 {
				g.Evidence = ev
			}
			return
		}
	}
	rep.Findings = append(rep.Findings, OperationFinding{
		Class: ClassDefeated, Kind: spec.EventControlDefeat, Control: "watchdog", Rule: f.Signature,
		Detail: events.Redact(f.Detail), At: f.At, Sources: []string{source}, Evidence: ev,
	})
}
