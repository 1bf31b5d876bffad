package records

import (
	"time"

	"github.com/gensee/gensee/spec"
)

// Record is one of Refusal, Admission, EgressDenied, Gate, Finding.
type Record interface{ isRecord() }

// Operation is what labels an operation's records: its id, the selector
// and contract it was admitted under, and its pod (nil outside CRI).
type Operation struct {
	ID        string
	Namespace string // containerd's
	Container string
	Selector  string
	Contract  string
	Pod       *spec.KubernetesRef
}

// Refusal is one line of refusals.jsonl.
type Refusal struct{ spec.RefusalRecord }

// Admission is an operation admitted and bound. Reason is
// admission.ReasonAdmitted or ReasonSafeDefault (FallbackFrom says why);
// Timing is nil where the front door records none.
type Admission struct {
	Op           Operation
	At           time.Time
	Reason       string
	FallbackFrom string
	Timing       *spec.AdmissionTiming
}

// EgressDenied is one egress_denied event: a sample of the table's denials
// (NFLOG is rate-limited; the manifest's counter is the count).
type EgressDenied struct {
	Op    Operation
	Event spec.Event
}

// ClassVerdict is the gate's verdict on one product class.
type ClassVerdict struct{ Class, Verdict string }

// Gate is an operation's manifest: the gate's overall verdict, per
// declared product class, and its violations.
type Gate struct {
	Op         Operation
	At         time.Time
	Verdict    string
	Classes    []ClassVerdict
	Violations []spec.Violation
	ExitStatus uint32
}

// Finding is one control_defeat finding of attention.json.
type Finding struct {
	Op      Operation
	Finding spec.Finding
}

func (Refusal) isRecord()      {}
func (Admission) isRecord()    {}
func (EgressDenied) isRecord() {}
func (Gate) isRecord()         {}
func (Finding) isRecord()      {}

// NoClass labels the gate verdict of a contract that declares no product.
const NoClass = "none"

// gateOf is m's verdict per declared product class of contract c: a
// product's own record, else a violation naming its slot (fail), else the
// gate's overall verdict (a missing product, a gate that did not run).
func gateOf(op Operation, c spec.Contract, m *spec.Manifest, at time.Time) Gate {
	g := Gate{Op: op, At: at, Verdict: m.Gate.Verdict, Violations: m.Gate.Violations, ExitStatus: m.ExitStatus}
	if len(c.Products) == 0 {
		g.Classes = []ClassVerdict{{Class: NoClass, Verdict: m.Gate.Verdict}}
		return g
	}
	for _, p := range c.Products {
		v := m.Gate.Verdict
		if v == spec.VerdictFail {
			v = spec.VerdictPass // unless this product failed, below
		}
		for _, v2 := range m.Gate.Violations {
			if v2.Slot == p.Slot {
				v = spec.VerdictFail
			}
		}
		for _, r := range m.Products {
			if r.Slot == p.Slot && r.Verdict != "" {
				v = r.Verdict
			}
		}
		g.Classes = append(g.Classes, ClassVerdict{Class: p.Class, Verdict: v})
	}
	return g
}
