package service

import (
	"context"
	"os"
	"sync"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/monitor"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// netBoundary is an operation's network boundary: the netns handle that
// keeps the table reachable, the plan installed there, the monitor (deny
// log, watchdog, binding sensor) and how the table went. It has its own
// lock; the lifecycle and the exit pipeline never hold it.
type netBoundary struct {
	// private: the netns is the container's own (runc made it), so
	// closing the last handle removes the table with it.
	private bool
	log     *log.Entry

	// starting is held from sensorsDue until startSensors returns: the
	// exit path, armed before the sensors start, drains with them and
	// stops them only once they have started.
	starting sync.WaitGroup

	mu      sync.Mutex
	netns   *os.File         // guarded by mu; nil once removed
	plan    *netpolicy.Plan  // guarded by mu
	mon     *monitor.Monitor // guarded by mu
	removed string           // how the table went, once it did; guarded by mu
}

// Ways the table goes (spec.NetworkEnforcement.TableRemoved).
const (
	removedDeleted   = spec.TableDeleted
	removedWithNetns = spec.TableWithNetns
)

// install takes f (the init's netns), the plan and its monitor, opens the
// deny-log reader and installs the table, read back against the plan. On
// error the boundary holds what it took: close releases it.
func (b *netBoundary) install(ctx context.Context, f *os.File, plan *netpolicy.Plan, mon *monitor.Monitor) error {
	mon.OpenReader(int(f.Fd()), plan, !b.private)
	b.mu.Lock()
	b.netns, b.plan, b.mon = f, plan, mon
	b.mu.Unlock()
	return netpolicy.Apply(ctx, int(f.Fd()), plan)
}

func (b *netBoundary) monitor() *monitor.Monitor {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mon
}

// note records a boundary event (events.jsonl and the publisher); before
// install there is nowhere to record it.
func (b *netBoundary) note(ev spec.Event) {
	if m := b.monitor(); m != nil {
		m.Note(ev)
	}
}

// noteDeferred is note with the event's fsync left to closeMonitor.
func (b *netBoundary) noteDeferred(ev spec.Event) {
	if m := b.monitor(); m != nil {
		m.NoteDeferred(ev)
	}
}

// sensorsDue says startSensors is on its way: until it returns, the
// drain's steps and stopSensors wait for it.
func (b *netBoundary) sensorsDue() { b.starting.Add(1) }

// startSensors starts the watchdog and binding sensor for the init of
// sub (none without a subject), and ends what sensorsDue began.
func (b *netBoundary) startSensors(sub *spec.Subject) {
	defer b.starting.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	if sub != nil && b.mon != nil && b.netns != nil {
		b.mon.Start(int(b.netns.Fd()), b.plan, cgroup.Proc{PID: sub.InitPID, Start: sub.StartTime})
	}
}

// drainSteps are the drain's steps with this boundary's binding sensor,
// once it has started.
func (b *netBoundary) drainSteps() drain.Steps {
	b.starting.Wait()
	return drain.StepsFor(b.monitor())
}

// stopSensors stops the sensors and returns what the table watcher saw
// differ from the table's plan meanwhile (monitor.Monitor.Drift).
func (b *netBoundary) stopSensors() (drift []string) {
	b.starting.Wait()
	if m := b.monitor(); m != nil {
		m.StopSensors()
		drift = m.Drift()
	}
	return drift
}

// counters reads the table's counters; ok is false when there is no
// table to read (never installed, or already removed).
func (b *netBoundary) counters(ctx context.Context) (c netpolicy.Counters, ok bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.netns == nil || b.plan == nil {
		return c, false, nil
	}
	c, err = netpolicy.ReadCounters(ctx, int(b.netns.Fd()), b.plan)
	return c, true, err
}

// finish collects the denied attempts heard against the table's count.
func (b *netBoundary) finish(denied uint64, counted bool) spec.DeniedAttempts {
	if m := b.monitor(); m != nil {
		return m.Finish(denied, counted)
	}
	return spec.DeniedAttempts{}
}

// remove removes the table and releases the netns; idempotent. It returns
// how the table went, or "" when it is still installed.
//
// A private netns made by runc for this container dies with its last
// reference, and its table with it. Callers only get here once the
// container's processes are gone (drained at exit, or killed by runc
// delete), so our handle is that last reference: closing it is the removal,
// and costs no nftables transaction on the exit path. A joined or host
// netns outlives the container: its table is deleted explicitly.
func (b *netBoundary) remove(ctx context.Context) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.netns == nil {
		return b.removed
	}
	how := removedWithNetns
	if b.plan != nil && !b.private {
		if err := netpolicy.Remove(ctx, int(b.netns.Fd()), b.plan.Table); err != nil {
			b.log.WithError(err).Error("remove network table")
			return ""
		}
		how = removedDeleted
	}
	b.netns.Close()
	b.netns = nil
	b.removed = how
	return how
}

// close stops the monitor and removes the table; for rollback and shim
// shutdown, where nothing is recorded.
func (b *netBoundary) close(ctx context.Context) {
	b.closeMonitor()
	b.remove(ctx)
}

// closeMonitor closes the monitor after the exit path read it; the events
// log is fsynced first. Sensors still starting (a shutdown racing Start)
// have started before they are stopped.
func (b *netBoundary) closeMonitor() {
	b.starting.Wait()
	if m := b.monitor(); m != nil {
		m.Close()
	}
}
