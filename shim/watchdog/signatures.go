package watchdog

import (
	"fmt"
	"time"

	"github.com/gensee/gensee/spec"
)

// fire records finding f (if any) in the attention and the result.
func (w *Watchdog) fire(r *Result, f *spec.Finding, target string) {
	if f == nil {
		return
	}
	w.findings = append(w.findings, *f)
	r.Findings = append(r.Findings, *f)
	r.Events = append(r.Events, spec.Event{
		Kind: spec.EventControlDefeat, Control: Control, Rule: f.Signature,
		Detail: f.Detail, Target: target, At: f.At, OperationID: w.cfg.OperationID,
	})
}

// denyThenReach: the reach entry seq hits every unspent watch entry (an
// egress denial or a policy_unbound) for the same target received before
// it. All of them and the reach are spent together.
func (w *Watchdog) denyThenReach(seq uint64, recv time.Time) (*spec.Finding, string) {
	reach := w.entry(seq)
	target := reach.Event.Target
	if target == "" {
		return nil, ""
	}
	var used []*Entry
	denials, unbound := 0, 0
	if e, ok := w.pinned[target]; ok && watches(*e) {
		// Older than anything in the trail: first.
		used = append(used, e)
		if e.Event.Kind == spec.EventEgressDenied {
			denials++
		} else {
			unbound++
		}
		delete(w.pinned, target)
	}
	for i := range w.trail {
		e := &w.trail[i]
		if e.Seq >= seq || !watches(*e) || e.Event.Target != target {
			continue
		}
		used = append(used, e)
		if e.Event.Kind == spec.EventEgressDenied {
			denials++
		} else {
			unbound++
		}
	}
	if len(used) == 0 {
		return nil, ""
	}
	used = append(used, reach)
	var why string
	switch {
	case denials > 0 && unbound > 0:
		why = fmt.Sprintf("was denied %d time(s) and its policy reported unbound", denials)
	case denials > 0:
		why = fmt.Sprintf("was denied %d time(s) (first at %s)", denials, used[0].Event.At.UTC().Format(time.RFC3339))
	default:
		why = "was on the watch after policy_unbound (" + used[0].Event.Detail + ")"
	}
	detail := fmt.Sprintf("%s %s and was later reached: %s", target, why, reach.Event.Detail)
	return spend(used, SignatureDenyThenReach, detail, recv), target
}

// single: an event that is evidence on its own (table tampered, product
// mismatch) fires its signature at once.
func (w *Watchdog) single(seq uint64, signature string, recv time.Time) (*spec.Finding, string) {
	e := w.entry(seq)
	var detail string
	switch signature {
	case SignatureTableTampered:
		detail = "the operation's nftables table changed while the task ran: " + e.Event.Detail
	case SignatureProductMismatch:
		detail = fmt.Sprintf("staged product %s no longer matches its manifest digest: %s", e.Event.Target, e.Event.Detail)
	}
	return spend([]*Entry{e}, signature, detail, recv), e.Event.Target
}

// spend marks the entries used and makes the finding.
func spend(used []*Entry, signature, detail string, recv time.Time) *spec.Finding {
	f := &spec.Finding{Signature: signature, Detail: spec.TruncateDetail(detail), At: recv}
	for _, e := range used {
		e.Spent = true
		f.Evidence = append(f.Evidence, e.Event)
	}
	return f
}

// entry is the trail entry with sequence number seq, which must still be
// in the trail (it was just pushed).
func (w *Watchdog) entry(seq uint64) *Entry {
	return &w.trail[len(w.trail)-1-int(w.seq-seq)]
}
