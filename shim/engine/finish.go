package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// The exit path's steps, each small and injected: a front door wires the
// real ones, tests wire fakes and check the order.
type (
	// Gate gates the workload's diff into staging. Prepare runs ahead of
	// the drain (a helper's start-up overlaps it); Run after it, bounded
	// by the exit path's limit and recovered (a panic is a failed
	// verdict).
	Gate interface {
		Prepare(ctx context.Context, started time.Time)
		Run(ctx context.Context, started time.Time) GateOutcome
	}
	// Drain kills whatever of the workload is still alive.
	Drain interface {
		Drain(ctx context.Context) drain.Result
	}
	// Network is the network boundary as the exit path uses it
	// (*Boundary).
	Network interface {
		NoteDeferred(ev spec.Event) // fsynced by CloseMonitor
		StopSensors() (drift []string)
		Counters(ctx context.Context) (netpolicy.Counters, bool, error)
		Finish(denied uint64, counted bool) spec.DeniedAttempts
		Remove(ctx context.Context) string
		CloseMonitor()
	}
	// Store makes the manifest durable.
	Store interface {
		WriteManifest(m *spec.Manifest) error
	}
	// Release ends the operation for its door once the manifest is
	// durable: the shim lets Wait, Delete and the held TaskExit go with
	// the exit status to report instead of the init's (override; nil: the
	// init's); a host run and a hook remove what they still hold and mark
	// the records cleaned.
	Release interface {
		Release(m *spec.Manifest, override *uint32) error
	}
)

// GateOutcome is the gate's result, or why it could not give one; Ran
// false: nothing was gated (verdict not_run).
type GateOutcome struct {
	Ran bool
	Res *gate.Result
	Err error
}

// NoDiff is the gate's outcome for a workload with no diff to read
// (problem says why): nothing to gate when the contract claims no product
// and fails nothing unclaimed, else a failed gate.
func NoDiff(problem string, c spec.Contract) GateOutcome {
	if len(c.Products) == 0 && !c.FailUnclaimed() {
		return GateOutcome{}
	}
	return GateOutcome{Ran: true, Err: fmt.Errorf("no diff to gate: %s", problem)}
}

// Facts is what the exit path learned: the workload's exit status, when it
// started, and what every door learns the same way (Exit).
type Facts struct {
	Exit
	// Status is the workload's exit status; nil: not known (an OCI hook is
	// not told it).
	Status *uint32
	// WaitStatus, when set, waits for the door's answer for the exit
	// status and gives Status; Finish calls it before the manifest.
	WaitStatus func() *uint32
	Started    time.Time
}

// DefaultGateLimit bounds a gate whose door names no limit.
const DefaultGateLimit = 2 * time.Minute

// GateLimitFor is the limit of a gate whose door names limit: limit, or
// DefaultGateLimit when it names none (0 or less).
func GateLimitFor(limit time.Duration) time.Duration {
	if limit <= 0 {
		return DefaultGateLimit
	}
	return limit
}

// GateGrace is how long past its limit a gate that ignores its context
// is waited for before the exit path goes on without it.
const GateGrace = 5 * time.Second

// Finish is the exit path of a started workload, the same through every
// front door, in this order (docs/design.md §10):
//
//  1. the gate is prepared (a helper's start-up), overlapping
//  2. the drain of the cgroup and of every escaped process;
//  3. the gate, on a diff nothing writes any more, bounded by GateLimit
//     and recovered, beside the network's end (nothing of the workload is
//     left to move it): the sensors stopped, the table's counters read,
//     the denied attempts collected against them, the table removed;
//  4. the exit status (WaitStatus);
//  5. the manifest, naming all of the above, built and made durable,
//     beside the gate's events and the events log's fsync (CloseMonitor);
//  6. release, with the operator's gate-failed status when the gate
//     failed.
//
// A workload that never started runs the network's part of 3, then 5 and
// 6 (NeverStarted).
type Finish struct {
	Gate     Gate
	Drain    Drain
	Network  Network
	Store    Store
	Release  Release
	Manifest func(Facts) *spec.Manifest
	// GateLimit bounds the gate (0: DefaultGateLimit).
	GateLimit time.Duration
	// GateFailedStatus is the operator's gate_failed_exit_status; 0 keeps
	// the workload's status.
	GateFailedStatus uint32
	// Settle, when set, runs once the gate and the network's end are done
	// (or the gate was left at its limit), before the manifest: a host run
	// gives back the space it reserved for its records there.
	Settle func()
	Log    *log.Entry
}

// Run runs the exit path for a workload that exited with what x says. It
// returns the manifest (always) and what failed to make it durable or to
// release the operation.
func (p *Finish) Run(ctx context.Context, x Facts) (*spec.Manifest, error) {
	t0 := time.Now()
	p.Gate.Prepare(ctx, x.Started)
	k := p.Drain.Drain(ctx)
	x.Drained, x.DrainErr, x.Escapes = k.Drained, k.Err, k.Escapes
	if len(x.Escapes) > 0 {
		p.Log.WithField("escapes", len(x.Escapes)).Warn("processes of the workload were outside the bound cgroup; the exit drain killed those still alive")
	}
	if x.DrainErr != nil {
		p.Log.WithError(x.DrainErr).Error("drain cgroup")
	}
	t1 := time.Now()
	gated := make(chan GateOutcome, 1)
	go func() { gated <- p.runGate(ctx, x.Started) }()
	p.finishNetwork(ctx, &x)
	g := <-gated
	x.GateRan, x.GateRes, x.GateErr = g.Ran, g.Res, g.Err
	if p.Settle != nil {
		p.Settle()
	}
	t2 := time.Now()
	if x.WaitStatus != nil {
		x.Status = x.WaitStatus()
	}
	t3 := time.Now()
	// The gate's events come after the watchdog's end (Finish): they are
	// trail only, never findings. They are noted, and the events log
	// fsynced and closed, beside the manifest's write.
	m, werr := p.writeManifest(x, GateEvents(g.Res, g.Err))
	p.Log.WithField("drain_ms", ms(t1.Sub(t0))).WithField("gate_ms", ms(t2.Sub(t1))).
		WithField("status_ms", ms(t3.Sub(t2))).WithField("manifest_ms", ms(time.Since(t3))).
		WithField("verdict", m.Gate.Verdict).Info("exit path done")
	var override *uint32
	if m.Gate.Verdict == spec.VerdictFail {
		p.Log.WithField("verdict", m.Gate.Verdict).WithField("violations", len(m.Gate.Violations)).Warn("product gate did not pass")
		if code := p.GateFailedStatus; code != 0 {
			override = &code
		}
	}
	return m, errors.Join(werr, p.Release.Release(m, override))
}

// NeverStarted finishes a workload that never started: nothing ran,
// nothing is gated, and the manifest says so.
func (p *Finish) NeverStarted(ctx context.Context) (*spec.Manifest, error) {
	x := Facts{}
	p.finishNetwork(ctx, &x)
	m, werr := p.writeManifest(x, nil)
	return m, errors.Join(werr, p.Release.Release(m, nil))
}

// runGate runs the gate bounded by the limit (the gate's context ends at
// it; a gate that ignores it is left GateGrace later) and recovers a
// panic as a failed gate. A gate that ended on its context says why, the
// same in every door: its limit passed (named with gate_timeout, which
// raises it), or it was stopped (the door shutting down).
func (p *Finish) runGate(ctx context.Context, started time.Time) GateOutcome {
	limit := GateLimitFor(p.GateLimit)
	gctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	done := make(chan GateOutcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				p.Log.WithField("stack", string(debug.Stack())).Error("product gate panicked")
				done <- GateOutcome{Ran: true, Err: fmt.Errorf("the product gate failed: %v", r)}
			}
		}()
		done <- p.Gate.Run(gctx, started)
	}()
	t := time.NewTimer(limit + GateGrace)
	defer t.Stop()
	select {
	case g := <-done:
		// Labelled by which context ended, not by the error alone: the
		// door's (its shutdown) before the gate's own limit, read from
		// the clock (a gate's own timer at the deadline, as the shim's
		// helper kill, may fire before the context's).
		onContext := errors.Is(g.Err, context.DeadlineExceeded) || errors.Is(g.Err, context.Canceled)
		deadline, _ := gctx.Deadline()
		switch {
		case onContext && ctx.Err() != nil:
			g.Err = fmt.Errorf("the product gate was stopped: %w", g.Err)
		case onContext && !time.Now().Before(deadline):
			g.Err = fmt.Errorf("the product gate reached its limit %s (gate_timeout): %w", limit, g.Err)
		}
		return g
	case <-t.C:
		return GateOutcome{Ran: true, Err: fmt.Errorf("the product gate did not finish within its limit %s (gate_timeout)", limit)}
	}
}

// finishNetwork stops the sensors (the table may now be removed without
// it looking like tampering) and keeps the drift they saw, reads the
// counters beside that (a read changes nothing a sensor watches: no
// commit, no counter reset), collects the denied attempts against them
// and removes the table, recording all of it in x. The monitor stays
// open for writeManifest to close.
func (p *Finish) finishNetwork(ctx context.Context, x *Facts) {
	t0 := time.Now()
	type read struct {
		c   netpolicy.Counters
		ok  bool
		err error
		at  time.Time
	}
	counters := make(chan read, 1)
	go func() {
		c, ok, err := p.Network.Counters(ctx)
		counters <- read{c, ok, err, time.Now()}
	}()
	x.Drift = p.Network.StopSensors()
	t1 := time.Now()
	r := <-counters
	var denied uint64
	var counted bool
	if r.ok {
		if denied, counted = x.Counted(r.c, r.err); !counted {
			p.Log.WithError(r.err).Error("read network counters")
		}
	}
	t2 := time.Now()
	x.Attempts = p.Network.Finish(denied, counted)
	t3 := time.Now()
	x.Removed = p.Network.Remove(ctx)
	p.Log.WithField("sensors_ms", ms(t1.Sub(t0))).WithField("counters_ms", ms(r.at.Sub(t0))).
		WithField("attempts_ms", ms(t3.Sub(t2))).WithField("remove_ms", ms(time.Since(t3))).Debug("network finalized")
}

// writeManifest builds the manifest of x and makes it durable, beside the
// last events' notes and the monitor's close (the events log's last
// fsync): all of it is on disk when it returns.
func (p *Finish) writeManifest(x Facts, last []spec.Event) (*spec.Manifest, error) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for _, ev := range last {
			p.Network.NoteDeferred(ev)
		}
		p.Network.CloseMonitor()
	}()
	m := p.Manifest(x)
	err := p.Store.WriteManifest(m)
	if err != nil {
		p.Log.WithError(err).Error("write manifest")
		err = fmt.Errorf("write manifest: %w", err)
	}
	<-closed
	return m, err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// RecordStore writes the manifest into the operation's records, fsynced
// (record.Store.WriteBytes), and indexes a run an inference admitted by
// its observation digest for the analyzer's history
// (record.Store.AppendHistory), beside the write: the index is a hint
// that is never fsynced, and a full one is rewritten (parsed, trimmed,
// each line's manifest looked up), work that need not wait for the
// manifest's fsyncs.
type RecordStore struct {
	Store record.Store
	ID    string
	Log   *log.Entry // where a failure to index is logged; nil: log.L
}

// WriteManifest makes m durable. A failure to index it is logged, never
// returned: the index is a hint to analyzers, the manifest the record. A
// manifest whose write failed may have its line in the index: a reader
// skips a line whose manifest is not there.
func (s RecordStore) WriteManifest(m *spec.Manifest) error {
	b, err := record.EncodeJSON(record.ManifestFile, m)
	if err != nil {
		return err
	}
	indexed := make(chan error, 1)
	if m.ObservationDigest == "" { // AppendHistory skips runs no inference admitted
		indexed <- nil
	} else {
		go func() { indexed <- s.Store.AppendHistory(s.ID, m, b) }()
	}
	err = s.Store.WriteBytes(s.ID, record.ManifestFile, b)
	if ierr := <-indexed; ierr != nil {
		l := s.Log
		if l == nil {
			l = log.L
		}
		l.WithError(ierr).Warn("index the manifest by its observation digest")
	}
	return err
}
