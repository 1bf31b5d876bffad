package watchdog

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

const opID = "0f3a9c1d2e4b5a697887766554433221"

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func newT() *Watchdog {
	return New(Config{OperationID: opID, Table: "gensee_0f3a9c1d2e4b", DenyRule: spec.NetworkAllowExact, Allowed: "192.0.2.10:443/tcp"})
}

// clock is a receive clock that ticks a millisecond per reading.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Millisecond); return c.t }

func kinds(evs []spec.Event) string {
	var k []string
	for _, e := range evs {
		k = append(k, e.Kind)
	}
	return strings.Join(k, ",")
}

// step is one observation and what it must produce.
type step struct {
	do    func(w *Watchdog, c *clock) Result
	kinds string // kinds of Result.Events, comma-joined
	fires string // signatures fired, comma-joined
}

func denied(target string) func(*Watchdog, *clock) Result {
	return func(w *Watchdog, c *clock) Result { n := c.now(); return w.Denied(target, n, n) }
}

func reached(target string) func(*Watchdog, *clock) Result {
	return func(w *Watchdog, c *clock) Result {
		n := c.now()
		return w.Reached(target, "conntrack: tcp flow established", n, n)
	}
}

func unbound(target string) func(*Watchdog, *clock) Result {
	return func(w *Watchdog, c *clock) Result {
		n := c.now()
		return w.CgroupChanged(target, "cgroup id changed", n, n)
	}
}

func drift(detail string) func(*Watchdog, *clock) Result {
	return func(w *Watchdog, c *clock) Result { n := c.now(); return w.TableDrift(detail, n, n) }
}

func allowed() func(*Watchdog, *clock) Result {
	return func(w *Watchdog, c *clock) Result { w.AllowedFlow(c.now()); return Result{} }
}

const (
	tA = "198.51.100.7:80/tcp"
	tB = "198.51.100.8:53/udp"
)

func TestSignatures(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"deny then reach fires once", []step{
			{denied(tA), "egress_denied", ""},
			{reached(tA), "flow_reached,control_defeat", SignatureDenyThenReach},
			{reached(tA), "flow_reached", ""}, // evidence spent
		}},
		{"reach before deny does not fire", []step{
			{reached(tA), "flow_reached", ""},
			{denied(tA), "egress_denied", ""},
		}},
		{"reach of another target does not fire", []step{
			{denied(tA), "egress_denied", ""},
			{reached(tB), "flow_reached", ""},
		}},
		{"new denial after a finding is new evidence", []step{
			{denied(tA), "egress_denied", ""},
			{reached(tA), "flow_reached,control_defeat", SignatureDenyThenReach},
			{allowed(), "", ""},
			{denied(tA), "egress_denied", ""},
			{reached(tA), "flow_reached,control_defeat", SignatureDenyThenReach},
		}},
		{"several denials are spent together", []step{
			{denied(tA), "egress_denied", ""},
			{denied(tA), "egress_denied,hint_loop", ""},
			{reached(tA), "flow_reached,control_defeat", SignatureDenyThenReach},
			{reached(tA), "flow_reached", ""},
		}},
		{"policy_unbound alone fires nothing", []step{
			{unbound(tA), "policy_unbound", ""},
			{unbound(""), "policy_unbound", ""},
		}},
		{"policy_unbound target joins the watch", []step{
			{unbound(tA), "policy_unbound", ""},
			{reached(tA), "flow_reached,control_defeat", SignatureDenyThenReach},
			{reached(tA), "flow_reached", ""},
		}},
		{"table tampered fires at once, each change once", []step{
			{drift("table inet gensee_x is missing"), "table_tampered,control_defeat", SignatureTableTampered},
			{drift("extra rule at position 0"), "table_tampered,control_defeat", SignatureTableTampered},
		}},
		{"product mismatch fires", []step{
			{func(w *Watchdog, c *clock) Result {
				n := c.now()
				return w.ProductMismatch("out/report", "sha256:aa... is now sha256:bb...", n, n)
			}, "product_mismatch,control_defeat", SignatureProductMismatch},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, clk := newT(), &clock{t: t0}
			for i, s := range c.steps {
				r := s.do(w, clk)
				if got := kinds(r.Events); got != s.kinds {
					t.Errorf("step %d: events %q, want %q", i, got, s.kinds)
				}
				var fired []string
				for _, f := range r.Findings {
					fired = append(fired, f.Signature)
				}
				if got := strings.Join(fired, ","); got != s.fires {
					t.Errorf("step %d: fired %q, want %q", i, got, s.fires)
				}
				for _, e := range r.Events {
					if err := e.Validate(); err != nil {
						t.Errorf("step %d: invalid %s event: %v", i, e.Kind, err)
					}
				}
			}
		})
	}
}

func TestSameEvidenceTwice(t *testing.T) {
	w := newT()
	ev := spec.Event{Kind: spec.EventTableTampered, Control: "network", Detail: "table missing", At: t0, OperationID: opID}
	if r := w.Note(ev, t0); len(r.Findings) != 1 {
		t.Fatalf("first: %+v", r)
	}
	if r := w.Note(ev, t0.Add(time.Second)); len(r.Findings) != 0 || len(r.Events) != 0 {
		t.Fatalf("the same event again flagged: %+v", r)
	}
}

func TestDenyThenReachEvidence(t *testing.T) {
	w := newT()
	w.Denied(tA, t0, t0)
	w.Denied(tB, t0, t0)
	r := w.Reached(tA, "conntrack: tcp 10.0.0.2:4000 -> 198.51.100.7:80 ESTABLISHED", t0.Add(time.Second), t0.Add(time.Second))
	if len(r.Findings) != 1 {
		t.Fatalf("findings %+v", r.Findings)
	}
	f := r.Findings[0]
	if len(f.Evidence) != 2 || f.Evidence[0].Kind != spec.EventEgressDenied || f.Evidence[1].Kind != spec.EventFlowReached {
		t.Fatalf("evidence %+v", f.Evidence)
	}
	if !strings.Contains(f.Detail, tA) || !strings.Contains(f.Detail, "ESTABLISHED") || !f.At.Equal(t0.Add(time.Second)) {
		t.Errorf("finding %+v", f)
	}
	cd := r.Events[len(r.Events)-1]
	if cd.Kind != spec.EventControlDefeat || cd.Rule != SignatureDenyThenReach || cd.Target != tA || cd.OperationID != opID {
		t.Errorf("control_defeat event %+v", cd)
	}
	if got := w.Watched(); len(got) != 1 || got[0] != tB {
		t.Errorf("Watched = %v, want [%s] (tA spent)", got, tB)
	}
}

// TestDenialLoop: ten retries of one denied connect give exactly one
// hint_loop; an allowed flow in between starts a new loop; the task's end
// ends it too. Guidance never sets the attention.
func TestDenialLoop(t *testing.T) {
	w, clk := newT(), &clock{t: t0}
	count := func(n int) int {
		hints := 0
		for range n {
			for _, e := range denied(tA)(w, clk).Events {
				if e.Kind == spec.EventHintLoop {
					hints++
					if !strings.Contains(e.Detail, tA) || !strings.Contains(e.Hint, "192.0.2.10:443/tcp") || !strings.Contains(e.Hint, "mediator") {
						t.Errorf("hint_loop event %+v", e)
					}
				}
			}
		}
		return hints
	}
	if n := count(10); n != 1 {
		t.Fatalf("10 retries: %d hint_loop events, want 1", n)
	}
	w.AllowedFlow(clk.now())
	if n := count(1); n != 0 {
		t.Fatalf("one denial after an allowed flow: %d hints", n)
	}
	if n := count(5); n != 1 {
		t.Fatalf("new loop: %d hints, want 1", n)
	}
	w.End()
	if n := count(2); n != 1 {
		t.Fatalf("loop after End: %d hints, want 1", n)
	}
	if _, set := w.Attention(); set {
		t.Fatal("guidance set the attention")
	}
}

func TestDenialLoopNoNetwork(t *testing.T) {
	w := New(Config{OperationID: opID})
	w.Denied(tA, t0, t0)
	r := w.Denied(tB, t0, t0)
	h := r.Events[len(r.Events)-1]
	if h.Kind != spec.EventHintLoop || !strings.Contains(h.Hint, "no network at all") || !strings.Contains(h.Detail, tA+", "+tB) {
		t.Fatalf("hint %+v", h)
	}
}

func TestTrailCap(t *testing.T) {
	w := newT()
	for i := range 100 {
		w.Note(spec.Event{Kind: spec.EventGateRejected, Control: "gate", Detail: fmt.Sprint(i), At: t0}, t0.Add(time.Duration(i)))
	}
	tr := w.Trail()
	if len(tr) != TrailCap || tr[0].Event.Detail != "36" || tr[TrailCap-1].Event.Detail != "99" || tr[0].Seq != 37 {
		t.Fatalf("trail of %d from %q (seq %d) to %q", len(tr), tr[0].Event.Detail, tr[0].Seq, tr[len(tr)-1].Event.Detail)
	}
}

// TestEvictedDenialPinned: a denial the trail evicted (a workload flooding
// it with other events) still watches its target, and fires once; the
// spent pin is gone.
func TestEvictedDenialPinned(t *testing.T) {
	w := newT()
	w.Denied(tA, t0, t0)
	for range TrailCap {
		w.Note(spec.Event{Kind: spec.EventGateRejected, Control: "gate", At: t0}, t0)
	}
	if !slices.Contains(w.Watched(), tA) {
		t.Fatalf("watched %q lacks the evicted denial's target", w.Watched())
	}
	r := w.Reached(tA, "conntrack", t0, t0)
	if len(r.Findings) != 1 || r.Findings[0].Signature != SignatureDenyThenReach || len(r.Findings[0].Evidence) != 2 {
		t.Fatalf("findings %+v, want one deny_then_reach on the pinned denial", r.Findings)
	}
	if r := w.Reached(tA, "conntrack again", t0, t0); len(r.Findings) != 0 {
		t.Fatalf("the spent pin fired again: %+v", r.Findings)
	}
}

// TestAttention: set by a finding, kept across later ones (never
// replaced), cleared only by Clear or End.
func TestAttention(t *testing.T) {
	w, clk := newT(), &clock{t: t0}
	denied(tA)(w, clk)
	reached(tA)(w, clk)
	a, set := w.Attention()
	if !set || a.State != spec.AttentionControlDefeat || len(a.Findings) != 1 || a.OperationID != opID {
		t.Fatalf("attention %+v %v", a, set)
	}
	drift("table missing")(w, clk)
	allowed()(w, clk)
	for range 5 {
		denied(tB)(w, clk) // a loop of guidance does not touch it
	}
	a, _ = w.Attention()
	if len(a.Findings) != 2 || a.Findings[0].Signature != SignatureDenyThenReach || a.Findings[1].Signature != SignatureTableTampered {
		t.Fatalf("attention %+v", a.Findings)
	}
	w.Clear()
	if _, set := w.Attention(); set {
		t.Fatal("Clear left attention")
	}
	drift("table missing again")(w, clk)
	w.End()
	if _, set := w.Attention(); set {
		t.Fatal("End left attention")
	}
}
