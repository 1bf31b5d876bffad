package spec

import (
	"time"
	"unicode/utf8"
)

// Event kinds (docs/design.md §7). A boundary event reports a refusal; it never
// grants anything. control_defeat and flow_reached are the watchdog's: a
// signature that fired, and the reach observation it used as evidence.
// hint_loop is guidance: it never changes a decision.
const (
	EventAdmissionDenied   = "admission_denied"
	EventCapabilityRemoved = "capability_removed"
	EventEgressDenied      = "egress_denied"
	EventGateRejected      = "gate_rejected"
	EventPolicyUnbound     = "policy_unbound"
	EventTableTampered     = "table_tampered"
	EventDeadlineExceeded  = "deadline_exceeded"
	EventProductMismatch   = "product_mismatch"
	EventFlowReached       = "flow_reached"
	EventControlDefeat     = "control_defeat"
	EventHintLoop          = "hint_loop"
)

// AttentionControlDefeat is the only attention state: a watchdog signature
// found evidence that a boundary failed.
const AttentionControlDefeat = "control_defeat"

// Attention is an operation's attention record (attention.json). The
// first finding creates it; later findings are appended, never replace
// one. It outlives the task: the task's end clears nothing, and a person's
// clearing (gensee attention clear) is recorded on each finding it
// covered, never deleted. The operation needs attention while any finding
// is open (not cleared). It never stops the task.
type Attention struct {
	OperationID string    `json:"operation_id"`
	State       string    `json:"state"` // AttentionControlDefeat
	Findings    []Finding `json:"findings"`
}

// Open is the findings no person has cleared yet.
func (a Attention) Open() []Finding {
	var out []Finding
	for _, f := range a.Findings {
		if f.Cleared == nil {
			out = append(out, f)
		}
	}
	return out
}

// Finding is one control-defeat signature that fired: its name, one
// sentence saying what was seen, the events it used as evidence (spent: they
// never flag again), when it fired on the shim's receive clock, and, once
// a person looked, who cleared it and when.
type Finding struct {
	Signature string    `json:"signature"`
	Detail    string    `json:"detail"`
	Evidence  []Event   `json:"evidence"`
	At        time.Time `json:"at"`
	Cleared   *Clearing `json:"cleared,omitempty"`
}

// Clearing is a person's decision that a finding was looked at: the
// account that cleared it (as the kernel names the caller), when, and
// what they noted.
type Clearing struct {
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
}

// MaxEventDetail is the longest Detail an event may carry, in characters.
const MaxEventDetail = 300

// Event is one boundary event: which control refused what, under which
// rule. Detail is redacted and at most MaxEventDetail characters; Hint is
// guidance only and never changes a decision.
type Event struct {
	Kind        string    `json:"kind"`
	Control     string    `json:"control"` // e.g. "admission", "network", "gate", "watchdog"
	Rule        string    `json:"rule,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	Target      string    `json:"target,omitempty"` // host/IP:port or path, when known
	At          time.Time `json:"at"`
	OperationID string    `json:"operation_id,omitempty"` // empty when admission failed before one existed
	Hint        string    `json:"hint,omitempty"`
}

// KnownEventKind reports whether kind is one of the Event* constants.
func KnownEventKind(kind string) bool {
	switch kind {
	case EventAdmissionDenied, EventCapabilityRemoved, EventEgressDenied, EventGateRejected,
		EventPolicyUnbound, EventTableTampered, EventDeadlineExceeded, EventProductMismatch,
		EventFlowReached, EventControlDefeat, EventHintLoop:
		return true
	}
	return false
}

// TruncateDetail cuts s to at most MaxEventDetail characters on a rune
// boundary, marking the cut with "...".
func TruncateDetail(s string) string {
	if utf8.RuneCountInString(s) <= MaxEventDetail {
		return s
	}
	r := []rune(s)
	return string(r[:MaxEventDetail-3]) + "..."
}

// Validate checks an event before it is written.
func (e *Event) Validate() error {
	p := newProblems()
	if !KnownEventKind(e.Kind) {
		p.addf("kind", "%q is not an event kind", truncate(e.Kind, 80))
	}
	if e.Control == "" {
		p.add("control", "is required")
	}
	if n := utf8.RuneCountInString(e.Detail); n > MaxEventDetail {
		p.addf("detail", "is %d characters, at most %d allowed (use TruncateDetail)", n, MaxEventDetail)
	}
	if e.At.IsZero() {
		p.add("at", "is required")
	}
	return p.err()
}
