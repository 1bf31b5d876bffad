package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// calls is the order in which the fakes were called, shared by all of them.
type calls struct {
	mu   sync.Mutex
	list []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	c.list = append(c.list, s)
	c.mu.Unlock()
}

func (c *calls) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

// before fails unless a happened, and happened before b.
func (c *calls) before(t *testing.T, a, b string) {
	t.Helper()
	l := c.get()
	i, j := slices.Index(l, a), slices.Index(l, b)
	if i < 0 || j < 0 || i > j {
		t.Errorf("want %q before %q; calls %v", a, b, l)
	}
}

// The fake steps.
type fakeGate struct {
	c   *calls
	out GateOutcome
	run func(ctx context.Context) GateOutcome // replaces out when set
}

func (g *fakeGate) Prepare(context.Context, time.Time) { g.c.add("gate.prepare") }
func (g *fakeGate) Run(ctx context.Context, _ time.Time) GateOutcome {
	g.c.add("gate.run")
	if g.run != nil {
		return g.run(ctx)
	}
	return g.out
}

type fakeDrain struct{ c *calls }

func (d fakeDrain) Drain(context.Context) drain.Result {
	d.c.add("drain")
	return drain.Result{Drained: 1}
}

type fakeNetwork struct {
	c     *calls
	drift []string // what the table watcher saw
}

func (n fakeNetwork) NoteDeferred(ev spec.Event) { n.c.add("noteDeferred " + ev.Kind) }
func (n fakeNetwork) StopSensors() []string {
	n.c.add("net.stopSensors")
	return n.drift
}
func (n fakeNetwork) Counters(context.Context) (netpolicy.Counters, bool, error) {
	n.c.add("net.counters")
	return netpolicy.Counters{Denied: netpolicy.Count{Packets: 2}}, true, nil
}
func (n fakeNetwork) Finish(denied uint64, counted bool) spec.DeniedAttempts {
	n.c.add(fmt.Sprintf("net.finish %d %v", denied, counted))
	return spec.DeniedAttempts{}
}
func (n fakeNetwork) Remove(context.Context) string {
	n.c.add("net.remove")
	return spec.TableWithNetns
}
func (n fakeNetwork) CloseMonitor() { n.c.add("net.closeMonitor") }

type fakeStore struct {
	c   *calls
	m   *spec.Manifest
	err error
}

func (s *fakeStore) WriteManifest(m *spec.Manifest) error {
	s.c.add("store.manifest " + m.Gate.Verdict)
	s.m = m
	return s.err
}

type fakeRelease struct {
	c        *calls
	override *uint32
}

func (r *fakeRelease) Release(m *spec.Manifest, override *uint32) error {
	r.c.add("release")
	r.override = override
	return nil
}

// fixture is a Finish whose steps are all fakes.
type fixture struct {
	c       *calls
	gate    *fakeGate
	store   *fakeStore
	release *fakeRelease
	p       *Finish
}

func newFixture(t *testing.T, gateFailedStatus uint32) *fixture {
	c := &calls{}
	f := &fixture{c: c, gate: &fakeGate{c: c}, store: &fakeStore{c: c}, release: &fakeRelease{c: c}}
	st := record.Store{Dir: t.TempDir()}
	adm := &spec.Admission{OperationID: "0123456789abcdef0123456789abcdef", Netns: spec.NetnsPrivate}
	f.p = &Finish{Gate: f.gate, Drain: fakeDrain{c}, Network: fakeNetwork{c: c}, Store: f.store, Release: f.release,
		Manifest: func(x Facts) *spec.Manifest {
			return Manifest(st, Door{Namespace: "test", ContainerID: "c1", Subject: "container", Admission: adm}, x)
		},
		GateFailedStatus: gateFailedStatus, Log: log.L}
	return f
}

// Finish runs its steps in their order, and releases last: the gate
// beside the network's end, the manifest beside the monitor's close;
// everything else in sequence.
func TestFinishOrder(t *testing.T) {
	f := newFixture(t, 0)
	f.gate.out = GateOutcome{Ran: true, Err: errors.New("boom")}
	st := uint32(3)
	m, err := f.p.Run(context.Background(), Facts{Status: &st})
	if err != nil {
		t.Fatal(err)
	}
	got := f.c.get()
	// Each group runs after the one before it; within a group, in any
	// order unless listed in sequence below.
	groups := [][]string{
		{"gate.prepare"},
		{"drain"},
		{"gate.run", "net.stopSensors", "net.counters", "net.finish 2 true", "net.remove"},
		{"noteDeferred " + spec.EventGateRejected, "net.closeMonitor", "store.manifest " + spec.VerdictFail},
		{"release"},
	}
	var flat []string
	for _, g := range groups {
		flat = append(flat, g...)
	}
	if len(got) != len(flat) {
		t.Fatalf("steps\n got %v\nwant %v (in groups)", got, groups)
	}
	at := 0
	for _, g := range groups {
		if !sameSet(got[at:at+len(g)], g) {
			t.Fatalf("steps\n got %v\nwant %v (in groups)", got, groups)
		}
		at += len(g)
	}
	f.c.before(t, "net.stopSensors", "net.counters")
	f.c.before(t, "net.counters", "net.finish 2 true")
	f.c.before(t, "net.finish 2 true", "net.remove")
	f.c.before(t, "noteDeferred "+spec.EventGateRejected, "net.closeMonitor")
	if m.ExitStatus != 3 || m.Drained != 1 || m.Enforcement.Network.TableRemoved != spec.TableWithNetns || m.Observation.Counters.DeniedPackets != 2 {
		t.Fatalf("manifest does not carry what the steps said: %+v", m)
	}
	if f.release.override != nil {
		t.Fatal("override without gate_failed_exit_status")
	}
	if m.Enforcement.Network.Status != spec.NetworkEnforced {
		t.Fatalf("network status %q without drift", m.Enforcement.Network.Status)
	}
}

// A drift the table watcher saw downgrades the manifest's network status,
// whatever the netns, and is listed.
func TestFinishDrift(t *testing.T) {
	f := newFixture(t, 0)
	f.p.Network = fakeNetwork{c: f.c, drift: []string{"table gensee_x is missing"}}
	m, _ := f.p.Run(context.Background(), Facts{})
	if m.Enforcement.Network.Status != spec.NetworkDriftDetected || len(m.Observation.TableDrift) != 1 {
		t.Fatalf("network status %q, drift %v", m.Enforcement.Network.Status, m.Observation.TableDrift)
	}
}

// The operator's gate-failed status replaces the workload's only when the
// gate failed: a gate with nothing to gate (not_run) keeps it.
func TestFinishGateFailedStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		out     GateOutcome
		verdict string
		want    bool
	}{
		{"failed", GateOutcome{Ran: true, Err: errors.New("gate failed")}, spec.VerdictFail, true},
		{"passed", GateOutcome{Ran: true}, spec.VerdictPass, false},
		{"nothing to gate", NoDiff("not an overlay", spec.Contract{}), spec.VerdictNotRun, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 86)
			f.gate.out = tc.out
			m, _ := f.p.Run(context.Background(), Facts{})
			if m.Gate.Verdict != tc.verdict || (f.release.override != nil) != tc.want {
				t.Fatalf("verdict %q override %v; want %q, override %v", m.Gate.Verdict, f.release.override, tc.verdict, tc.want)
			}
			if tc.want && *f.release.override != 86 {
				t.Fatalf("override %d", *f.release.override)
			}
		})
	}
	if o := NoDiff("not an overlay", spec.Contract{Products: []spec.Product{{Slot: "out"}}}); !o.Ran || o.Err == nil {
		t.Fatalf("a claimed product with no diff must fail the gate: %+v", o)
	}
}

// A gate that ignores its limit is left behind (failed verdict) once the
// limit and its grace passed: the exit path, the manifest and the release
// still happen. The bubble's clock makes the limit take no wall time.
func TestFinishGateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 0)
		hang := make(chan struct{})
		defer close(hang)
		f.gate.run = func(context.Context) GateOutcome { <-hang; return GateOutcome{Ran: true} }
		f.p.GateLimit = time.Minute
		t0 := time.Now()
		m, _ := f.p.Run(context.Background(), Facts{})
		if took := time.Since(t0); took != time.Minute+gateGrace {
			t.Fatalf("the exit path waited %s for a hung gate, want its limit and grace", took)
		}
		if m.Gate.Verdict != spec.VerdictFail || !strings.Contains(m.Gate.Violations[0].Detail, "limit") {
			t.Fatalf("gate %+v", m.Gate)
		}
		if !slices.Contains(f.c.get(), "release") {
			t.Fatal("not released")
		}
	})
}

// A gate that honours its context ends at the limit with its own error.
func TestFinishGateContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 0)
		f.gate.run = func(ctx context.Context) GateOutcome {
			<-ctx.Done()
			return GateOutcome{Ran: true, Err: ctx.Err()}
		}
		f.p.GateLimit = time.Second
		t0 := time.Now()
		m, _ := f.p.Run(context.Background(), Facts{})
		if took := time.Since(t0); took != time.Second {
			t.Fatalf("took %s, want the limit", took)
		}
		if m.Gate.Verdict != spec.VerdictFail {
			t.Fatalf("gate %+v", m.Gate)
		}
	})
}

// A panic in the gate is a failed verdict, never the door's death.
func TestFinishGatePanic(t *testing.T) {
	f := newFixture(t, 0)
	f.gate.run = func(context.Context) GateOutcome { panic("boom") }
	m, _ := f.p.Run(context.Background(), Facts{})
	if m.Gate.Verdict != spec.VerdictFail || !strings.Contains(m.Gate.Violations[0].Detail, "boom") {
		t.Fatalf("gate %+v", m.Gate)
	}
}

// A workload that never started: the network's end, the manifest
// (not_run, counters read), the release; no drain, no gate.
func TestFinishNeverStarted(t *testing.T) {
	f := newFixture(t, 86)
	m, err := f.p.NeverStarted(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.c.get() {
		if s == "drain" || strings.HasPrefix(s, "gate.") {
			t.Fatalf("%s for a workload that never started: %v", s, f.c.get())
		}
	}
	f.c.before(t, "net.remove", "store.manifest "+spec.VerdictNotRun)
	f.c.before(t, "store.manifest "+spec.VerdictNotRun, "release")
	if m.Gate.Verdict != spec.VerdictNotRun || f.release.override != nil {
		t.Fatalf("verdict %q override %v", m.Gate.Verdict, f.release.override)
	}
}

// A manifest that could not be made durable is the exit path's error;
// the release still happens.
func TestFinishStoreError(t *testing.T) {
	f := newFixture(t, 0)
	f.store.err = errors.New("disk full")
	_, err := f.p.Run(context.Background(), Facts{})
	if err == nil || !strings.Contains(err.Error(), "disk full") || !slices.Contains(f.c.get(), "release") {
		t.Fatalf("err %v, calls %v", err, f.c.get())
	}
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
