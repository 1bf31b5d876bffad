package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/engine/enginetest"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// fixture is a Finish whose steps are all fakes.
type fixture struct {
	c       *enginetest.Calls
	gate    *enginetest.Gate
	store   *enginetest.Store
	release *enginetest.Release
	p       *engine.Finish
}

func newFixture(t *testing.T, gateFailedStatus uint32) *fixture {
	c := enginetest.NewCalls()
	f := &fixture{c: c, gate: &enginetest.Gate{C: c}, store: &enginetest.Store{C: c}, release: &enginetest.Release{C: c}}
	st := record.Store{Dir: t.TempDir()}
	adm := &spec.Admission{OperationID: "0123456789abcdef0123456789abcdef", Netns: spec.NetnsPrivate}
	f.p = &engine.Finish{Gate: f.gate, Drain: enginetest.Drain{C: c}, Network: enginetest.Network{C: c}, Store: f.store, Release: f.release,
		Manifest: func(x engine.Facts) *spec.Manifest {
			return engine.Manifest(st, engine.Door{Namespace: "test", ContainerID: "c1", Subject: "container", Admission: adm}, x)
		},
		GateFailedStatus: gateFailedStatus, Log: log.L}
	return f
}

// Finish runs its steps in their order, and releases last: the gate
// beside the network's end, the counters' read beside the sensors' stop,
// the manifest beside the monitor's close; everything else in sequence.
func TestFinishOrder(t *testing.T) {
	f := newFixture(t, 0)
	f.gate.Out = engine.GateOutcome{Ran: true, Err: errors.New("boom")}
	st := uint32(3)
	m, err := f.p.Run(context.Background(), engine.Facts{Status: &st})
	if err != nil {
		t.Fatal(err)
	}
	got := f.c.Get()
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
		if !enginetest.SameSet(got[at:at+len(g)], g) {
			t.Fatalf("steps\n got %v\nwant %v (in groups)", got, groups)
		}
		at += len(g)
	}
	// The counters are read beside the sensors' stop; the attempts are
	// collected against them once both are done.
	f.c.Before(t, "net.stopSensors", "net.finish 2 true")
	f.c.Before(t, "net.counters", "net.finish 2 true")
	f.c.Before(t, "net.finish 2 true", "net.remove")
	f.c.Before(t, "noteDeferred "+spec.EventGateRejected, "net.closeMonitor")
	if m.ExitStatus != 3 || m.Drained != 1 || m.Enforcement.Network.TableRemoved != spec.TableWithNetns || m.Observation.Counters.DeniedPackets != 2 {
		t.Fatalf("manifest does not carry what the steps said: %+v", m)
	}
	if f.release.Override != nil {
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
	f.p.Network = enginetest.Network{C: f.c, Drift: []string{"table gensee_x is missing"}}
	m, _ := f.p.Run(context.Background(), engine.Facts{})
	if m.Enforcement.Network.Status != spec.NetworkDriftDetected || len(m.Observation.TableDrift) != 1 {
		t.Fatalf("network status %q, drift %v", m.Enforcement.Network.Status, m.Observation.TableDrift)
	}
}

// The operator's gate-failed status replaces the workload's only when the
// gate failed: a gate with nothing to gate (not_run) keeps it.
func TestFinishGateFailedStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		out     engine.GateOutcome
		verdict string
		want    bool
	}{
		{"failed", engine.GateOutcome{Ran: true, Err: errors.New("gate failed")}, spec.VerdictFail, true},
		{"passed", engine.GateOutcome{Ran: true}, spec.VerdictPass, false},
		{"nothing to gate", engine.NoDiff("not an overlay", spec.Contract{}), spec.VerdictNotRun, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 86)
			f.gate.Out = tc.out
			m, _ := f.p.Run(context.Background(), engine.Facts{})
			if m.Gate.Verdict != tc.verdict || (f.release.Override != nil) != tc.want {
				t.Fatalf("verdict %q override %v; want %q, override %v", m.Gate.Verdict, f.release.Override, tc.verdict, tc.want)
			}
			if tc.want && *f.release.Override != 86 {
				t.Fatalf("override %d", *f.release.Override)
			}
		})
	}
	if o := engine.NoDiff("not an overlay", spec.Contract{Products: []spec.Product{{Slot: "out"}}}); !o.Ran || o.Err == nil {
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
		f.gate.RunFunc = func(context.Context) engine.GateOutcome { <-hang; return engine.GateOutcome{Ran: true} }
		f.p.GateLimit = time.Minute
		t0 := time.Now()
		m, _ := f.p.Run(context.Background(), engine.Facts{})
		if took := time.Since(t0); took != time.Minute+engine.GateGrace {
			t.Fatalf("the exit path waited %s for a hung gate, want its limit and grace", took)
		}
		if m.Gate.Verdict != spec.VerdictFail || !strings.Contains(m.Gate.Violations[0].Detail, "limit 1m0s (gate_timeout)") {
			t.Fatalf("gate %+v", m.Gate)
		}
		if !slices.Contains(f.c.Get(), "release") {
			t.Fatal("not released")
		}
	})
}

// A gate that honours its context ends at the limit with its own error,
// which the exit path says is the limit, named with gate_timeout, in
// every door; a gate stopped by its door's context is not blamed on it.
func TestFinishGateContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 0)
		f.gate.RunFunc = func(ctx context.Context) engine.GateOutcome {
			<-ctx.Done()
			return engine.GateOutcome{Ran: true, Err: ctx.Err()}
		}
		f.p.GateLimit = time.Second
		t0 := time.Now()
		m, _ := f.p.Run(context.Background(), engine.Facts{})
		if took := time.Since(t0); took != time.Second {
			t.Fatalf("took %s, want the limit", took)
		}
		if m.Gate.Verdict != spec.VerdictFail || !strings.Contains(m.Gate.Violations[0].Detail, "limit 1s (gate_timeout): context deadline exceeded") {
			t.Fatalf("gate %+v", m.Gate)
		}
		// No limit named by the door: the default, named the same way.
		f = newFixture(t, 0)
		f.gate.RunFunc = func(ctx context.Context) engine.GateOutcome {
			<-ctx.Done()
			return engine.GateOutcome{Ran: true, Err: ctx.Err()}
		}
		t0 = time.Now()
		m, _ = f.p.Run(context.Background(), engine.Facts{})
		if took := time.Since(t0); took != engine.DefaultGateLimit ||
			!strings.Contains(m.Gate.Violations[0].Detail, "limit 2m0s (gate_timeout)") {
			t.Fatalf("no limit named: took %s, gate %+v", took, m.Gate)
		}
	})
	f := newFixture(t, 0)
	f.gate.RunFunc = func(ctx context.Context) engine.GateOutcome {
		return engine.GateOutcome{Ran: true, Err: fmt.Errorf("walk: %w", ctx.Err())}
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	m, _ := f.p.Run(stopped, engine.Facts{})
	if d := m.Gate.Violations[0].Detail; m.Gate.Verdict != spec.VerdictFail || strings.Contains(d, "gate_timeout") ||
		!strings.Contains(d, "the product gate was stopped: walk: context canceled") {
		t.Fatalf("a stopped gate: %+v", m.Gate)
	}
}

// A panic in the gate is a failed verdict, never the door's death.
func TestFinishGatePanic(t *testing.T) {
	f := newFixture(t, 0)
	f.gate.RunFunc = func(context.Context) engine.GateOutcome { panic("boom") }
	m, _ := f.p.Run(context.Background(), engine.Facts{})
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
	for _, s := range f.c.Get() {
		if s == "drain" || strings.HasPrefix(s, "gate.") {
			t.Fatalf("%s for a workload that never started: %v", s, f.c.Get())
		}
	}
	f.c.Before(t, "net.remove", "store.manifest "+spec.VerdictNotRun)
	f.c.Before(t, "store.manifest "+spec.VerdictNotRun, "release")
	if m.Gate.Verdict != spec.VerdictNotRun || f.release.Override != nil {
		t.Fatalf("verdict %q override %v", m.Gate.Verdict, f.release.Override)
	}
}

// A manifest that could not be made durable is the exit path's error;
// the release still happens.
func TestFinishStoreError(t *testing.T) {
	f := newFixture(t, 0)
	f.store.Err = errors.New("disk full")
	_, err := f.p.Run(context.Background(), engine.Facts{})
	if err == nil || !strings.Contains(err.Error(), "disk full") || !slices.Contains(f.c.Get(), "release") {
		t.Fatalf("err %v, calls %v", err, f.c.Get())
	}
}

// Settle runs once the gate and the network's end are done, before the
// manifest; also when the gate was left at its limit.
func TestFinishSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 0)
		f.p.Settle = func() { f.c.Add("settle") }
		hang := make(chan struct{})
		defer close(hang)
		f.gate.RunFunc = func(context.Context) engine.GateOutcome { <-hang; return engine.GateOutcome{Ran: true} }
		f.p.GateLimit = time.Second
		f.p.Run(context.Background(), engine.Facts{})
		f.c.Before(t, "net.remove", "settle")
		f.c.Before(t, "settle", "store.manifest "+spec.VerdictFail)
		f.c.Before(t, "settle", "noteDeferred "+spec.EventGateRejected)
	})
}
