package watchdog

import (
	"slices"
	"sync"
	"time"

	"github.com/gensee/gensee/spec"
)

// TrailCap is the most events the trail keeps; the oldest go first.
const TrailCap = 64

// Control names the watchdog in the events it makes.
const Control = "watchdog"

// Signatures (the Rule of a control_defeat event, Finding.Signature).
const (
	SignatureDenyThenReach   = "deny_then_reach"
	SignatureTableTampered   = "table_tampered"
	SignatureProductMismatch = "product_mismatch"
)

// RuleDenialLoop is the Rule of a hint_loop event.
const RuleDenialLoop = "denial_loop"

// Config describes the operation the watchdog watches.
type Config struct {
	OperationID string
	Table       string // the operation's nftables table, for table_tampered events
	DenyRule    string // the Rule of egress_denied events, e.g. the contract's network mode
	// Allowed says in words what the contract allows, for the denial-loop
	// hint, e.g. "192.0.2.10:443/tcp"; empty means no network at all.
	Allowed string
}

// Entry is one event in the trail.
type Entry struct {
	Seq   uint64    // 1, 2, ... in receive order; never reused
	Recv  time.Time // the caller's receive clock
	Event spec.Event
	Spent bool // used as evidence by a signature
}

// Result is what one observation produced. Events are to be recorded and
// published in order: the observation's own event when the call built it,
// then hint_loop guidance, then one control_defeat event per finding.
// Findings are to raise the operation's attention.
type Result struct {
	Events   []spec.Event
	Findings []spec.Finding
}

// Watchdog is one operation's watchdog. Safe for concurrent use; every
// method is a quick in-memory fold.
type Watchdog struct {
	cfg Config

	mu    sync.Mutex // guards everything below
	trail []Entry    // oldest first, len <= TrailCap
	// pinned keeps, per target, the first unspent watch entry (a denial, a
	// policy_unbound) the trail evicted, at most PinnedCap targets: a
	// workload that floods the trail with other denials does not take a
	// target off the deny-then-reach watch.
	pinned   map[string]*Entry
	seq      uint64
	loop     denialLoop
	findings []spec.Finding // the attention; nil when clear
}

// New returns the watchdog of one operation.
func New(cfg Config) *Watchdog {
	return &Watchdog{cfg: cfg}
}

// Note folds an event into the trail at receive time recv and runs the
// signatures and the denial loop over it. The event is not in the returned
// Events (the caller has it). Kinds the watchdog has no signature for are
// kept in the trail only.
func (w *Watchdog) Note(ev spec.Event, recv time.Time) Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.note(ev, recv)
}

// note is Note with mu held.
func (w *Watchdog) note(ev spec.Event, recv time.Time) Result {
	var r Result
	switch ev.Kind {
	case spec.EventTableTampered, spec.EventProductMismatch:
		if w.seen(ev) {
			return r // the same evidence delivered twice flags once
		}
	}
	e := w.push(ev, recv)
	switch ev.Kind {
	case spec.EventEgressDenied:
		if h, ok := w.loop.denied(ev, recv, w.cfg); ok {
			r.Events = append(r.Events, h)
		}
	case spec.EventFlowReached:
		f, target := w.denyThenReach(e, recv)
		w.fire(&r, f, target)
	case spec.EventTableTampered:
		f, target := w.single(e, SignatureTableTampered, recv)
		w.fire(&r, f, target)
	case spec.EventProductMismatch:
		f, target := w.single(e, SignatureProductMismatch, recv)
		w.fire(&r, f, target)
	}
	return r
}

// PinnedCap bounds the targets kept on the watch after the trail evicted
// their evidence (pinned).
const PinnedCap = 4096

// push appends ev to the trail, evicting the oldest past TrailCap (an
// unspent watch entry among them is pinned), and returns its sequence
// number.
func (w *Watchdog) push(ev spec.Event, recv time.Time) uint64 {
	w.seq++
	w.trail = append(w.trail, Entry{Seq: w.seq, Recv: recv, Event: ev})
	if n := len(w.trail) - TrailCap; n > 0 {
		for _, e := range w.trail[:n] {
			w.pin(e)
		}
		w.trail = slices.Delete(w.trail, 0, n)
	}
	return w.seq
}

// pin keeps evicted entry e when it watches a target not pinned yet.
func (w *Watchdog) pin(e Entry) {
	if !watches(e) {
		return
	}
	if w.pinned == nil {
		w.pinned = map[string]*Entry{}
	}
	if _, ok := w.pinned[e.Event.Target]; ok || len(w.pinned) >= PinnedCap {
		return
	}
	w.pinned[e.Event.Target] = &e
}

// seen reports whether the trail already holds ev itself (same kind,
// target, detail and time). A sensor reporting a new change makes a new
// event, with its own time.
func (w *Watchdog) seen(ev spec.Event) bool {
	return slices.ContainsFunc(w.trail, func(e Entry) bool { return e.Event == ev })
}

// Trail returns a copy of the trail, oldest first.
func (w *Watchdog) Trail() []Entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.trail)
}

// Watched lists the targets on the deny-then-reach watch: those of unspent
// egress_denied and policy_unbound events still in the trail or pinned. A
// sensor reports reaches for these.
func (w *Watchdog) Watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, e := range w.trail {
		if watches(e) && !slices.Contains(out, e.Event.Target) {
			out = append(out, e.Event.Target)
		}
	}
	for t, e := range w.pinned {
		if watches(*e) && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

func watches(e Entry) bool {
	k := e.Event.Kind
	return !e.Spent && e.Event.Target != "" && (k == spec.EventEgressDenied || k == spec.EventPolicyUnbound)
}
