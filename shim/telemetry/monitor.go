package telemetry

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/nflog"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/watchdog"
	"github.com/gensee/gensee/shim/watchdog/evidence"
	"github.com/gensee/gensee/spec"
)

// maxAttempts bounds the denied attempts a manifest lists; past it the list
// says it is incomplete.
const maxAttempts = 256

// maxDrift bounds the table drifts a manifest lists (the events log has
// every one).
const maxDrift = 16

// Config names the operation a Monitor reports for and where it reports.
type Config struct {
	OperationID string
	Store       record.Store // the state dir holding the operation's records
	// DenyRule is the rule denied packets are reported under (the
	// contract's network mode).
	DenyRule string
	// Ctx and Pub are where events and findings are published besides
	// events.jsonl (the shim: its namespaced context and publisher). A nil
	// Pub publishes nowhere else: host runs and OCI hooks have no
	// containerd to publish to, and their findings are in the attention
	// file.
	Ctx context.Context
	Pub events.Publisher
	// Logger carries the front door's fields (container_id, operation_id).
	Logger *log.Entry
	// Notify, when set, runs the operator's notify command for a finding;
	// it must not block.
	Notify func(spec.Finding)
}

// Monitor is one operation's boundary telemetry: the events log, the NFLOG
// reader of denied packets, the watchdog and its sensors. It reports; it
// never decides anything and never stops the task.
type Monitor struct {
	cfg Config
	log *events.Log
	wd  *watchdog.Watchdog
	rd  *nflog.Reader // nil when NFLOG could not be opened: attempts then incomplete
	// rdOpened is closed once the reader's open attempt ended (OpenReader
	// in a private netns opens it in the background); rd is read only
	// through reader(), after it.
	rdOpened chan struct{}
	// bind follows the container's processes (nil without a cgroup2
	// mount). Set by start, before the exit path can run.
	bind *evidence.BindingPoller
	// table is the table watcher WatchTable made for Start, subscribed
	// before the install's read-back; nil once Start took it.
	table *evidence.TableWatcher

	cancel    context.CancelFunc // nil until start
	wg        sync.WaitGroup     // the sensor goroutines
	rdDone    chan struct{}      // closed when the reader's consumer returned (after start)
	closeOnce sync.Once

	mu       sync.Mutex
	attempts []spec.DeniedAttempt // guarded by mu
	seen     uint64               // attempts read, listed or not; guarded by mu
	outside  uint64               // of seen, from outside the bound cgroup (netns scope); guarded by mu
	drift    []string             // what the table watcher saw, len <= maxDrift; guarded by mu
}

// Open opens the events log and the watchdog of the operation. It runs
// before the table is installed; the NFLOG reader is attached by
// OpenReader before the table is installed too, so the workload's first
// packet is already heard.
func Open(c Config, plan *netpolicy.Plan) (*Monitor, error) {
	dir, err := c.Store.OperationDir(c.OperationID)
	if err != nil {
		return nil, err
	}
	l, err := events.OpenLog(filepath.Join(dir, record.EventsFile), 0)
	if err != nil {
		return nil, fmt.Errorf("open events log: %w", err)
	}
	return &Monitor{cfg: c, log: l, rdDone: make(chan struct{}), wd: watchdog.New(watchdog.Config{
		OperationID: c.OperationID, Table: plan.Table, DenyRule: c.DenyRule, Allowed: allowedWords(plan),
	})}, nil
}

// WatchTable makes the table watcher Start will run, for the plan's table
// in the namespace netnsFD refers to. Its Subscribe goes between the
// table's commit and its read-back (netpolicy.ApplyAt's installed) and
// its Seed after the read-back: the watcher's first check is then that
// read-back, not one of its own beside the workload's start.
func (m *Monitor) WatchTable(netnsFD int, plan *netpolicy.Plan) *evidence.TableWatcher {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.table != nil {
		m.table.Close()
	}
	m.table = evidence.NewTableWatcher(netnsFD, plan)
	return m.table
}

// tableWatcher is WatchTable's watcher, once (nil after): Start runs it,
// or Close releases it.
func (m *Monitor) tableWatcher() *evidence.TableWatcher {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.table
	m.table = nil
	return t
}

// Binding is the binding sensor (nil before Start, or without a cgroup2
// mount).
func (m *Monitor) Binding() *evidence.BindingPoller { return m.bind }

// allowedWords says what the plan allows, for the denial-loop hint.
func allowedWords(p *netpolicy.Plan) string {
	parts := make([]string, 0, len(p.Allow)+1)
	for _, t := range p.Allow {
		parts = append(parts, t.String())
	}
	if p.Loopback {
		parts = append(parts, "loopback")
	}
	return strings.Join(parts, ", ")
}

// OpenReader binds an NFLOG group for the plan in the netns. In a netns the
// container shares (host, pod), other operations log there too: each takes
// its own group, derived from its id, probing a few if one is taken — the
// group is then known when OpenReader returns, before the table naming it
// is installed. In a private netns the group is the plan's: the bind runs
// in the background (on a dup of netnsFD), beside the table's install, and
// Start waits for it, so it is bound before the workload's first packet
// (only the cgroup's processes make Denied, and they run after Start).
func (m *Monitor) OpenReader(netnsFD int, plan *netpolicy.Plan, shared bool) {
	m.rdOpened = make(chan struct{})
	if shared {
		defer close(m.rdOpened)
		plan.LogGroup = sharedLogGroup(m.cfg.OperationID)
		m.rd = m.openReader(netnsFD, plan, 16)
		return
	}
	fd, err := unix.FcntlInt(uintptr(netnsFD), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		defer close(m.rdOpened)
		m.cfg.Logger.WithError(err).Warn("NFLOG unavailable (dup netns fd): denied attempts will be counted, not listed")
		return
	}
	group := *plan
	go func() {
		defer close(m.rdOpened)
		defer unix.Close(fd)
		m.rd = m.openReader(fd, &group, 1)
	}()
}

func (m *Monitor) openReader(netnsFD int, plan *netpolicy.Plan, tries int) *nflog.Reader {
	var err error
	for i := 0; i < tries; i++ {
		var rd *nflog.Reader
		if rd, err = nflog.Open(netnsFD, plan.LogGroup); err == nil {
			return rd
		}
		plan.LogGroup++
	}
	m.cfg.Logger.WithError(err).Warn("NFLOG unavailable: denied attempts will be counted, not listed")
	return nil
}

// reader is the NFLOG reader once its open attempt ended (nil: none).
func (m *Monitor) reader() *nflog.Reader {
	if m.rdOpened != nil {
		<-m.rdOpened
	}
	return m.rd
}

// sharedLogGroup spreads operations over groups 10000..59999.
func sharedLogGroup(opID string) uint16 {
	var h uint32
	for _, c := range opID {
		h = h*31 + uint32(c)
	}
	return uint16(10000 + h%50000)
}

// Start runs the reader and the sensors until stop. init is the task's
// init, just started.
func (m *Monitor) Start(netnsFD int, plan *netpolicy.Plan, init cgroup.Proc) {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	if m.reader() != nil {
		ch := make(chan nflog.Attempt, 256)
		// Not a sensor: StopSensors leaves it reading, so that Finish can
		// wait for it to hear what the deny counter counted. Finish and
		// Close end it by closing it.
		go func() { m.rd.Run(context.Background(), ch); close(ch) }()
		go func() {
			defer close(m.rdDone)
			for a := range ch {
				switch {
				case a.Prefix == plan.LogPrefix:
				case plan.LogPrefixOutside != "" && a.Prefix == plan.LogPrefixOutside && a.HasUID:
					// A process of the container's own netns outside the
					// bound cgroup (an escape, or its children); kernel
					// packets of the netns carry no uid and are only counted.
					m.mu.Lock()
					m.outside++
					m.mu.Unlock()
				default:
					continue
				}
				m.attempt(a)
				m.emit(m.wd.Denied(a.Target, a.At, time.Now()))
			}
		}()
	} else {
		close(m.rdDone)
	}
	tw := m.tableWatcher()
	if tw == nil {
		tw = evidence.NewTableWatcher(netnsFD, plan)
	}
	m.run(func() error {
		return tw.Run(ctx, func(d evidence.Drift) {
			m.mu.Lock()
			if len(m.drift) < maxDrift {
				m.drift = append(m.drift, d.Detail)
			}
			m.mu.Unlock()
			m.emit(m.wd.TableDrift(d.Detail, d.At, time.Now()))
		})
	})
	h, herr := cgroup.Find()
	if herr == nil {
		m.bind = evidence.NewBindingPoller(h, plan.Cgroup, init)
	}
	flows := evidence.NewFlowPoller(netnsFD)
	flows.Scope, flows.Serve = plan.Scope, plan.Serve // whose flows, which ports served
	if m.bind != nil {
		flows.Escapees = m.bind.Escaped
	}
	m.run(func() error {
		return flows.Run(ctx, m.wd.Watched, func(r evidence.Reach) {
			m.emit(m.wd.Reached(r.Target, r.Detail, r.At, time.Now()))
		})
	})
	m.run(func() error {
		return evidence.NewCounterPoller(netnsFD, plan).Run(ctx, func(c evidence.CounterMove) {
			if c.Allowed.Packets > 0 {
				m.wd.AllowedFlow(time.Now())
			}
		})
	})
	if m.bind != nil {
		m.cfg.Logger.WithField("scope", m.bind.Scope()).Debug("binding sensor follows the container's processes")
		m.run(func() error { return m.bind.Run(ctx, m.Unbound) })
	} else {
		m.cfg.Logger.WithError(herr).Warn("no cgroup2 mount: processes leaving the bound cgroup are not seen")
	}
}

// Unbound records a binding finding: a policy_unbound event whose target,
// for an escaped process, joins the deny-then-reach watch.
func (m *Monitor) Unbound(u evidence.Unbound) {
	m.emit(m.wd.CgroupChanged(u.Target, u.Detail, u.At, time.Now()))
}

func (m *Monitor) run(fn func() error) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := fn(); err != nil {
			m.cfg.Logger.WithError(err).Warn("boundary sensor stopped")
		}
	}()
}

func (m *Monitor) attempt(a nflog.Attempt) {
	target := a.Addr.String()
	if a.Port != 0 {
		target = netip.AddrPortFrom(a.Addr, a.Port).String()
	}
	proto := strings.TrimPrefix(netpolicy.ProtoName(a.Proto), "proto-")
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen++
	if len(m.attempts) < maxAttempts {
		m.attempts = append(m.attempts, spec.DeniedAttempt{Target: target, Proto: proto, At: a.At.UTC()})
	}
}

// emit records r's events (appended to the events log, published,
// logged). Findings raise the operation's attention, publish on the
// attention topic, log an error line naming the signature and run the
// operator's notify command.
func (m *Monitor) emit(r watchdog.Result) {
	for _, ev := range r.Events {
		m.record(ev)
	}
	for _, f := range r.Findings {
		if _, err := events.RaiseAttention(m.cfg.Store, m.cfg.OperationID, f); err != nil {
			m.cfg.Logger.WithError(err).Error("raise attention")
		}
		if err := events.PublishFinding(m.cfg.Ctx, m.cfg.Pub, m.cfg.OperationID, f); err != nil {
			m.cfg.Logger.WithError(err).Warn("publish attention")
		}
		m.cfg.Logger.WithField("signature", f.Signature).WithField("detail", f.Detail).
			Error("control_defeat: a boundary control failed; the task keeps running, attention is set")
		if m.cfg.Notify != nil {
			m.cfg.Notify(f)
		}
	}
}

// Note records an event from a source outside the watchdog's sensors and
// folds it into the trail.
func (m *Monitor) Note(ev spec.Event) { m.note(ev, true) }

// NoteDeferred is Note with the event's fsync left to Close (or the next
// fsynced append): the exit path's last events, made durable beside the
// manifest's own fsync.
func (m *Monitor) NoteDeferred(ev spec.Event) { m.note(ev, false) }

func (m *Monitor) note(ev spec.Event, durable bool) {
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	ev.OperationID = m.cfg.OperationID
	m.recordAs(ev, durable)
	m.emit(m.wd.Note(ev, time.Now()))
}

func (m *Monitor) record(ev spec.Event) { m.recordAs(ev, true) }

func (m *Monitor) recordAs(ev spec.Event, durable bool) {
	ev = events.Sanitize(ev)
	appendEv := m.log.Append
	if !durable {
		appendEv = m.log.AppendDeferred
	}
	if err := appendEv(ev); err != nil {
		m.cfg.Logger.WithError(err).Warn("append event")
	}
	if err := events.Publish(m.cfg.Ctx, m.cfg.Pub, ev); err != nil {
		m.cfg.Logger.WithError(err).Warn("publish event")
	}
	m.cfg.Logger.WithField("kind", ev.Kind).WithField("target", ev.Target).Debug(ev.Detail)
}

// StopSensors stops everything but the NFLOG reader: the table may now be
// read and removed by the shim without it looking like tampering.
func (m *Monitor) StopSensors() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.wg.Wait()
}

// Drift lists what the table watcher saw differ from the table's plan
// since Start, oldest first (at most 16): every front door's exit path puts
// it in engine.Exit.Drift after StopSensors, which downgrades the
// manifest's network status (engine.NetworkStatus):
//
//	x.Drift = mon.Drift()
func (m *Monitor) Drift() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.drift)
}

// Finish waits (bounded) until the reader has heard as many denied packets
// as the table counted, closes it, and returns the attempts for the
// manifest. complete is true only when every denied packet was heard and
// listed and no event was dropped.
func (m *Monitor) Finish(denied uint64, counted bool) spec.DeniedAttempts {
	if m.reader() != nil {
		// Wait for the reader to catch up with the counter, but only while
		// it makes progress: a rate-limited log never catches up.
		deadline := time.Now().Add(300 * time.Millisecond)
		last, idle := m.rd.Received(), 0
		for last < denied && idle < 5 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			if now := m.rd.Received(); now > last {
				last, idle = now, 0
			} else {
				idle++
			}
		}
		m.rd.Close()
	}
	if m.cancel != nil {
		<-m.rdDone
	}
	m.wd.End() // the record's findings stay: see Findings
	m.mu.Lock()
	defer m.mu.Unlock()
	da := spec.DeniedAttempts{Items: m.attempts}
	// Attempts from outside the cgroup (netns scope) share the deny log
	// but not its counter: with any of them, completeness is unprovable.
	da.Complete = counted && m.rd != nil && m.outside == 0 && m.seen == denied && m.rd.Lost() == 0 &&
		uint64(len(m.attempts)) == m.seen && m.log.Dropped() == 0
	return da
}

// Close stops everything and closes the log; idempotent.
func (m *Monitor) Close() {
	m.closeOnce.Do(func() {
		m.StopSensors()
		if tw := m.tableWatcher(); tw != nil { // the sensors never started
			tw.Close()
		}
		if m.reader() != nil {
			m.rd.Close()
		}
		if err := m.log.Close(); err != nil {
			m.cfg.Logger.WithError(err).Warn("close events log")
		}
	})
}
