// Package enginetest holds fakes of the exit path's steps (engine.Finish)
// that record the order they were called in, for the engine's ordering
// tests and for a door's lifecycle tests around it.
package enginetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// Calls is the order in which the fakes (and whatever else a test adds)
// were called, shared by all of them.
type Calls struct {
	mu   sync.Mutex
	list []string
	seen chan string // every call, as it happens
}

// NewCalls is an empty record.
func NewCalls() *Calls { return &Calls{seen: make(chan string, 1024)} }

// Add records call s.
func (c *Calls) Add(s string) {
	c.mu.Lock()
	c.list = append(c.list, s)
	c.mu.Unlock()
	select {
	case c.seen <- s:
	default: // nobody waits on this many: Wait reads the list
	}
}

// Get is the calls so far, in order.
func (c *Calls) Get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

// Wait blocks until call s happened (bounded).
func (c *Calls) Wait(t testing.TB, s string) { c.WaitN(t, s, 1) }

// WaitN blocks until call s happened n times (bounded).
func (c *Calls) WaitN(t testing.TB, s string, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		k := 0
		for _, x := range c.Get() {
			if x == s {
				k++
			}
		}
		if k >= n {
			return
		}
		select {
		case <-c.seen:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%q happened %d times, want %d; calls %v", s, k, n, c.Get())
		}
	}
}

// Before fails unless a happened, and happened before b.
func (c *Calls) Before(t testing.TB, a, b string) {
	t.Helper()
	l := c.Get()
	i, j := slices.Index(l, a), slices.Index(l, b)
	if i < 0 || j < 0 || i > j {
		t.Errorf("want %q before %q; calls %v", a, b, l)
	}
}

// SameSet reports whether a and b hold the same strings, in any order.
func SameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// Gate is a gate that answers Out, or what RunFunc says when set.
type Gate struct {
	C       *Calls
	Out     engine.GateOutcome
	RunFunc func(ctx context.Context) engine.GateOutcome
}

func (g *Gate) Prepare(context.Context, time.Time) { g.C.Add("gate.prepare") }

func (g *Gate) Run(ctx context.Context, _ time.Time) engine.GateOutcome {
	g.C.Add("gate.run")
	if g.RunFunc != nil {
		return g.RunFunc(ctx)
	}
	return g.Out
}

// Drain drains one process.
type Drain struct{ C *Calls }

func (d Drain) Drain(context.Context) drain.Result {
	d.C.Add("drain")
	return drain.Result{Drained: 1}
}

// Network is a boundary whose table counted two denied packets; Drift is
// what its table watcher saw.
type Network struct {
	C     *Calls
	Drift []string
}

func (n Network) NoteDeferred(ev spec.Event) { n.C.Add("noteDeferred " + ev.Kind) }

func (n Network) StopSensors() []string {
	n.C.Add("net.stopSensors")
	return n.Drift
}

func (n Network) Counters(context.Context) (netpolicy.Counters, bool, error) {
	n.C.Add("net.counters")
	return netpolicy.Counters{Denied: netpolicy.Count{Packets: 2}}, true, nil
}

func (n Network) Finish(denied uint64, counted bool) spec.DeniedAttempts {
	n.C.Add(fmt.Sprintf("net.finish %d %v", denied, counted))
	return spec.DeniedAttempts{}
}

func (n Network) Remove(context.Context) string { n.C.Add("net.remove"); return spec.TableWithNetns }
func (n Network) CloseMonitor()                 { n.C.Add("net.closeMonitor") }

// Store keeps the last manifest written (M) and fails with Err.
type Store struct {
	C   *Calls
	M   *spec.Manifest
	Err error
}

func (s *Store) WriteManifest(m *spec.Manifest) error {
	s.C.Add("store.manifest " + m.Gate.Verdict)
	s.M = m
	return s.Err
}

// Release keeps the override it was given.
type Release struct {
	C        *Calls
	Override *uint32
}

func (r *Release) Release(_ *spec.Manifest, override *uint32) error {
	r.C.Add("release")
	r.Override = override
	return nil
}
