package service

import (
	"context"
	"sync"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// The exit pipeline's steps, each small and injected: the shim wires the
// real ones (exitPipelineFor), tests wire fakes and check the order.
type (
	// gateStep gates the task's diff into staging. prepare runs ahead of
	// the drain (the helper's start-up overlaps it); run after it.
	gateStep interface {
		prepare(ctx context.Context, started time.Time)
		run(ctx context.Context, started time.Time) gateOutcome
	}
	// drainStep kills whatever of the container is still alive.
	drainStep interface {
		drain(ctx context.Context) drain.Result
	}
	// networkStep is the network boundary as the exit path uses it.
	networkStep interface {
		noteDeferred(ev spec.Event) // fsynced by closeMonitor
		stopSensors() (drift []string)
		counters(ctx context.Context) (netpolicy.Counters, bool, error)
		finish(denied uint64, counted bool) spec.DeniedAttempts
		remove(ctx context.Context) string
		closeMonitor()
	}
	// manifestStore makes the manifest durable.
	manifestStore interface {
		writeManifest(m *spec.Manifest) error
	}
	// releaseStep lets Wait, Delete and the held TaskExit go, with the exit
	// status to report instead of the init's (nil: the init's).
	releaseStep interface {
		release(override *uint32)
	}
)

// exitPipeline is the exit path of a started task, in this order:
//
//  1. the gate helper is started (prepare), overlapping
//  2. the drain of the cgroup and of every escaped process;
//  3. the gate, on a diff nothing writes any more, beside the network's
//     end (nothing of the container is left to move it): the sensors
//     stopped, the table's counters read, the denied attempts collected
//     against them, the table removed;
//  4. the init's exit status (waitStatus: the pipeline starts on the
//     init's exit as its pidfd tells it, beside the inner service's
//     handling of that exit);
//  5. the manifest, naming all of the above, written and fsynced, beside
//     the gate's events and the events log's fsync (closeMonitor);
//  6. release: Wait, Delete and the held TaskExit go, with the operator's
//     gate-failed status when the gate did not pass.
//
// A task that never started runs the network's part of 3, then 4 and 5
// (neverStarted).
type exitPipeline struct {
	gate     gateStep
	drain    drainStep
	network  networkStep
	store    manifestStore
	release  releaseStep
	manifest func(exitFacts) *spec.Manifest
	// gateFailedStatus is the operator's gate_failed_exit_status; 0 keeps
	// the init's status.
	gateFailedStatus uint32
	log              *log.Entry
}

// run runs the pipeline for an init that exited with what x says.
func (p *exitPipeline) run(ctx context.Context, x exitFacts) *spec.Manifest {
	t0 := time.Now()
	p.gate.prepare(ctx, x.started)
	k := p.drain.drain(ctx)
	x.Drained, x.DrainErr, x.Escapes = k.Drained, k.Err, k.Escapes
	if len(x.Escapes) > 0 {
		p.log.WithField("escapes", len(x.Escapes)).Warn("processes of the container were outside the bound cgroup; the exit drain killed those still alive")
	}
	if x.DrainErr != nil {
		p.log.WithError(x.DrainErr).Error("drain cgroup")
	}
	t1 := time.Now()
	gated := make(chan gateOutcome, 1)
	go func() { gated <- p.gate.run(ctx, x.started) }()
	p.finalizeNetwork(ctx, &x)
	g := <-gated
	x.GateRan, x.GateRes, x.GateErr = true, g.res, g.err
	t2 := time.Now()
	if x.waitStatus != nil {
		x.status = x.waitStatus()
	}
	t3 := time.Now()
	// The gate's events come after the watchdog's end (finish): they are
	// trail only, never findings. They are noted, and the events log
	// fsynced and closed, beside the manifest's write.
	m := p.writeManifest(x, engine.GateEvents(g.res, g.err))
	p.log.WithField("drain_ms", ms(t1.Sub(t0))).WithField("gate_ms", ms(t2.Sub(t1))).
		WithField("status_ms", ms(t3.Sub(t2))).WithField("manifest_ms", ms(time.Since(t3))).
		WithField("verdict", m.Gate.Verdict).Info("exit path done")
	var override *uint32
	if m.Gate.Verdict != spec.VerdictPass {
		p.log.WithField("verdict", m.Gate.Verdict).WithField("violations", len(m.Gate.Violations)).Warn("product gate did not pass")
		if code := p.gateFailedStatus; code != 0 {
			override = &code
		}
	}
	p.release.release(override)
	return m
}

// neverStarted finalizes a task deleted before it started: nothing ran,
// nothing is gated, and the manifest says so.
func (p *exitPipeline) neverStarted(ctx context.Context) *spec.Manifest {
	x := exitFacts{}
	p.finalizeNetwork(ctx, &x)
	return p.writeManifest(x, nil)
}

// finalizeNetwork stops the sensors (the table may now be read and
// removed without it looking like tampering) and keeps the drift they
// saw, reads the counters,
// collects the denied attempts against them and removes the table,
// recording all of it in x. The monitor stays open for writeManifest to
// close.
func (p *exitPipeline) finalizeNetwork(ctx context.Context, x *exitFacts) {
	t0 := time.Now()
	x.Drift = p.network.stopSensors()
	t1 := time.Now()
	var denied uint64
	var counted bool
	if c, ok, err := p.network.counters(ctx); ok {
		if denied, counted = x.Counted(c, err); !counted {
			p.log.WithError(err).Error("read network counters")
		}
	}
	t2 := time.Now()
	x.Attempts = p.network.finish(denied, counted)
	t3 := time.Now()
	x.Removed = p.network.remove(ctx)
	p.log.WithField("sensors_ms", ms(t1.Sub(t0))).WithField("counters_ms", ms(t2.Sub(t1))).
		WithField("attempts_ms", ms(t3.Sub(t2))).WithField("remove_ms", ms(time.Since(t3))).Debug("network finalized")
}

// writeManifest builds the manifest of x and makes it durable, beside the
// last events' notes and the monitor's close (the events log's last
// fsync): all of it is on disk when it returns.
func (p *exitPipeline) writeManifest(x exitFacts, last []spec.Event) *spec.Manifest {
	closed := inBackground(func() error {
		for _, ev := range last {
			p.network.noteDeferred(ev)
		}
		p.network.closeMonitor()
		return nil
	})
	m := p.manifest(x)
	if err := p.store.writeManifest(m); err != nil {
		p.log.WithError(err).Error("write manifest")
	}
	closed()
	return m
}

// The real steps.

// exitPipelineFor wires op's exit pipeline to the real steps.
func exitPipelineFor(op *operation) *exitPipeline {
	return &exitPipeline{
		gate:             &helperGate{op: op},
		drain:            cgroupDrain{op: op},
		network:          op.net,
		store:            recordStore{store: op.store, id: op.id},
		release:          &opRelease{op: op},
		manifest:         op.manifest,
		gateFailedStatus: op.cfg.GateFailedExitStatus,
		log:              op.logger(op.ctx),
	}
}

// cgroupDrain drains the bound cgroup and every escaped process the
// binding sensor listed (drain.All).
type cgroupDrain struct{ op *operation }

func (d cgroupDrain) drain(ctx context.Context) drain.Result {
	sub := d.op.admission.Subject
	if sub == nil {
		return drain.Result{}
	}
	return drain.All(ctx, sub.CgroupPath, d.op.net.drainSteps())
}

// recordStore writes the manifest into the operation's records (fsynced).
type recordStore struct {
	store record.Store
	id    string
}

func (s recordStore) writeManifest(m *spec.Manifest) error {
	return s.store.WriteJSON(s.id, record.ManifestFile, m)
}

// opRelease closes the operation's done once, after setting the status
// override Wait, Delete and the held TaskExit report.
type opRelease struct {
	op   *operation
	once sync.Once
}

func (r *opRelease) release(override *uint32) {
	r.once.Do(func() {
		r.op.override = override
		if h := r.op.held; h != nil {
			h.override = override
		}
		close(r.op.done)
	})
}
