package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/telemetry"
	"github.com/gensee/gensee/spec"
)

// Boundary is one operation's network boundary, as every front door holds
// it: the netns handle that keeps the table reachable, the plan installed
// there, the monitor (deny log, watchdog, binding sensor) and how the
// table went. It has its own lock; a door's lifecycle and the exit path
// never hold it. The zero value is not usable: NewBoundary.
type Boundary struct {
	kind spec.NetnsKind
	log  *log.Entry

	// starting is held from SensorsDue until StartSensors returns: an exit
	// path armed before the sensors start drains with them and stops them
	// only once they have started.
	starting sync.WaitGroup

	// mon is set once, by Bind; read without mu, so that the exit path
	// stops the sensors while Counters holds mu for its read.
	mon atomic.Pointer[telemetry.Monitor]

	mu      sync.Mutex
	netns   *os.File        // guarded by mu; nil once removed
	own     bool            // netns is this process's own (BindSpec.Own); guarded by mu
	plan    *netpolicy.Plan // guarded by mu
	removed string          // how the table went, once it did; guarded by mu
}

// NewBoundary is an empty boundary for a workload whose sockets live in a
// netns of kind: nothing is held until Bind.
func NewBoundary(kind spec.NetnsKind, l *log.Entry) *Boundary {
	return &Boundary{kind: kind, log: l}
}

// BindSpec is what Bind binds: the operation, its contract's network
// section, the subject's cgroup, and the netns the subject's sockets live
// in, which Bind takes over (the boundary closes it, on error too).
type BindSpec struct {
	OperationID string
	Network     spec.Network
	Cgroup      netpolicy.CgroupRef
	Netns       *os.File
	// Own says Netns is the network namespace this process and all its
	// threads are in (a host run's): its netlink sockets are then opened
	// where the caller is, without the setns into Netns and back that each
	// one costs otherwise.
	Own bool
	// LogGroup, when set, replaces the plan's NFLOG group (the operator's
	// log_group).
	LogGroup uint16
	// Monitor is where the boundary's events and findings go; Bind fills
	// in what the plan decides.
	Monitor telemetry.Config
	// Mark, when set, writes the door's marker naming the table before the
	// table exists: a door that dies between the two leaves a marker whose
	// table may not exist, which its cleanup removes if present, never a
	// table in a shared netns no marker names. Nil: the door marked it
	// before Bind.
	Mark func(table string) error
}

// Bind's errors a door may refuse on: a contract's network section no
// table can be planned from (ErrPlan: the contract is at fault), and a
// table the kernel would not install or read back as planned (ErrInstall:
// the host lacks what the plan needs). Any other is the runtime's failure.
var (
	ErrPlan    = errors.New("plan network table")
	ErrInstall = errors.New("install network table")
)

// The kernel-facing steps of Bind; the ordering tests replace them.
var (
	openMonitor = telemetry.Open
	openReader  = (*telemetry.Monitor).OpenReader
	applyTable  = netpolicy.ApplyAt
)

// Bind plans the table, opens the monitor, marks, opens the deny-log
// reader and installs the table read back against the plan, in that
// order: every denied packet of the installed table is heard, and a
// marker names the table before it exists. In a netns the subject has to
// itself the table fails closed (whatever leaves the cgroup is still in
// the netns and still denied); a shared one (host, pod, a joined path)
// keeps the cgroup scope, where an escape is detected, never reported as
// enforced. On error the boundary holds what it took: Close releases it.
func (b *Boundary) Bind(ctx context.Context, s BindSpec) (*netpolicy.Plan, error) {
	b.mu.Lock()
	b.netns, b.own = s.Netns, s.Own
	nsFD := b.netnsFD()
	b.mu.Unlock()
	if s.Own {
		// A private netns is removed by closing its handle (Remove), and
		// one that is not this thread's would get the table elsewhere.
		own, err := netpolicy.SameNetns(int(s.Netns.Fd()))
		if err != nil || !own || !b.kind.Shared() {
			return nil, fmt.Errorf("bind spec: Own, but the netns is not this thread's shared one (%v)", err)
		}
	}
	scope := netpolicy.ScopeCgroup
	if !b.kind.Shared() {
		scope = netpolicy.ScopeNetns
	}
	plan, err := netpolicy.NewPlanScoped(s.OperationID, s.Network, s.Cgroup, scope)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	if s.LogGroup != 0 {
		plan.LogGroup = s.LogGroup
	}
	s.Monitor.DenyRule = s.Network.Mode
	mon, err := openMonitor(s.Monitor, plan)
	if err != nil {
		return nil, err
	}
	b.mon.Store(mon)
	if s.Mark != nil {
		if err := s.Mark(plan.Table); err != nil {
			return nil, fmt.Errorf("write the marker naming table %s: %w", plan.Table, err)
		}
	}
	openReader(mon, nsFD, plan, b.kind.Shared())
	b.mu.Lock()
	b.plan = plan
	b.mu.Unlock()
	// The table watcher subscribes between the commit and the read-back,
	// which is then its first check (telemetry.Monitor.WatchTable).
	tw := mon.WatchTable(nsFD, plan)
	tw.DialAhead()
	m, err := applyTable(ctx, nsFD, plan, func() {
		if err := tw.Subscribe(); err != nil {
			b.log.WithError(err).Warn("the table watcher subscribes at its start instead; until then a commit is seen by the generation it moves")
		}
	})
	if err != nil {
		return plan, fmt.Errorf("%w %s and read it back: %w", ErrInstall, plan.Table, err)
	}
	tw.Seed(m)
	return plan, nil
}

// netnsFD is the fd the netlink calls name the netns by: -1 (the
// caller's own namespace) when it is this process's (own). b.mu held,
// b.netns set.
func (b *Boundary) netnsFD() int {
	if b.own {
		return -1
	}
	return int(b.netns.Fd())
}

// Monitor is the boundary's monitor (nil before Bind opened it).
func (b *Boundary) Monitor() *telemetry.Monitor { return b.mon.Load() }

// Note records a boundary event (events.jsonl and the publisher); before
// Bind there is nowhere to record it.
func (b *Boundary) Note(ev spec.Event) {
	if m := b.Monitor(); m != nil {
		m.Note(ev)
	}
}

// NoteDeferred is Note with the event's fsync left to CloseMonitor.
func (b *Boundary) NoteDeferred(ev spec.Event) {
	if m := b.Monitor(); m != nil {
		m.NoteDeferred(ev)
	}
}

// SensorsDue says StartSensors is on its way: until the returned func is
// called (once StartSensors returned), the drain's steps and StopSensors
// wait for it.
func (b *Boundary) SensorsDue() (started func()) {
	b.starting.Add(1)
	var once sync.Once
	return func() { once.Do(b.starting.Done) }
}

// StartSensors starts the watchdog and binding sensor for the subject's
// first process (none without a subject).
func (b *Boundary) StartSensors(sub *spec.Subject) {
	b.mu.Lock()
	if m := b.mon.Load(); sub != nil && m != nil && b.netns != nil {
		m.Start(b.netnsFD(), b.plan, cgroup.Proc{PID: sub.InitPID, Start: sub.StartTime})
	}
	b.mu.Unlock()
}

// DrainSteps are the drain's steps with this boundary's binding sensor,
// once it has started.
func (b *Boundary) DrainSteps() drain.Steps {
	b.starting.Wait()
	return drain.StepsFor(b.Monitor())
}

// StopSensors stops the sensors and returns what the table watcher saw
// differ from the table's plan meanwhile (telemetry.Monitor.Drift).
func (b *Boundary) StopSensors() (drift []string) {
	b.starting.Wait()
	if m := b.Monitor(); m != nil {
		m.StopSensors()
		drift = m.Drift()
	}
	return drift
}

// Counters reads the table's counters; ok is false when there is no table
// to read (never installed, or already removed).
func (b *Boundary) Counters(ctx context.Context) (c netpolicy.Counters, ok bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.netns == nil || b.plan == nil {
		return c, false, nil
	}
	c, err = netpolicy.ReadCounters(ctx, b.netnsFD(), b.plan)
	return c, true, err
}

// Finish collects the denied attempts heard against the table's count.
func (b *Boundary) Finish(denied uint64, counted bool) spec.DeniedAttempts {
	if m := b.Monitor(); m != nil {
		return m.Finish(denied, counted)
	}
	return spec.DeniedAttempts{}
}

// Remove removes the table and releases the netns; idempotent. It returns
// how the table went (spec.TableDeleted, spec.TableWithNetns), or "" when
// it is still installed.
//
// A private netns made for the workload dies with its last reference, and
// its table with it. Callers only get here once the workload's processes
// are gone (drained at exit, or killed by the runtime's delete), so this
// handle is that last reference: closing it is the removal, and costs no
// nftables transaction on the exit path. A joined or host netns outlives
// the workload: its table is deleted explicitly.
func (b *Boundary) Remove(ctx context.Context) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.netns == nil {
		return b.removed
	}
	how := spec.TableWithNetns
	if b.plan != nil && b.kind.Shared() {
		if err := netpolicy.Remove(ctx, b.netnsFD(), b.plan.Table); err != nil {
			b.log.WithError(err).Error("remove network table")
			return ""
		}
		how = spec.TableDeleted
	}
	b.netns.Close()
	b.netns = nil
	b.removed = how
	return how
}

// Close stops the monitor and removes the table; for rollback and
// shutdown, where nothing is recorded. It returns how the table went ("":
// still installed).
func (b *Boundary) Close(ctx context.Context) string {
	b.CloseMonitor()
	return b.Remove(ctx)
}

// CloseMonitor closes the monitor after the exit path read it; the events
// log is fsynced first. Sensors still starting (a shutdown racing a
// start) have started before they are stopped.
func (b *Boundary) CloseMonitor() {
	b.starting.Wait()
	if m := b.Monitor(); m != nil {
		m.Close()
	}
}
