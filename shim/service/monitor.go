package service

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

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

// monitor is one operation's boundary telemetry: the events log, the NFLOG
// reader of denied packets, the watchdog and its sensors. It reports; it
// never decides anything and never stops the task.
type monitor struct {
	op  *operation
	pub events.Publisher
	log *events.Log
	wd  *watchdog.Watchdog
	rd  *nflog.Reader // nil when NFLOG could not be opened: attempts then incomplete
	// bind follows the container's processes (nil without a cgroup2
	// mount). Set by start, before the exit path can run.
	bind *evidence.BindingPoller

	cancel    context.CancelFunc // nil until start
	wg        sync.WaitGroup     // the sensor goroutines
	rdDone    chan struct{}      // closed when the reader's consumer returned (after start)
	closeOnce sync.Once

	mu       sync.Mutex
	attempts []spec.DeniedAttempt // guarded by mu
	seen     uint64               // attempts read, listed or not; guarded by mu
	outside  uint64               // of seen, from outside the bound cgroup (netns scope); guarded by mu
}

// openMonitor opens the events log and the watchdog of op. It runs at
// Create; the NFLOG reader is attached by openReader before the table is
// installed, so the workload's first packet is already heard.
func openMonitor(op *operation, pub events.Publisher, plan *netpolicy.Plan) (*monitor, error) {
	dir, err := op.store.OperationDir(op.id)
	if err != nil {
		return nil, err
	}
	l, err := events.OpenLog(filepath.Join(dir, record.EventsFile), 0)
	if err != nil {
		return nil, fmt.Errorf("open events log: %w", err)
	}
	return &monitor{op: op, pub: pub, log: l, rdDone: make(chan struct{}), wd: watchdog.New(watchdog.Config{
		OperationID: op.id, Table: plan.Table, DenyRule: op.contract.Network.Mode, Allowed: allowedWords(plan),
	})}, nil
}

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

// openReader binds an NFLOG group for the plan in the netns. In a netns the
// container shares (host, pod), other operations log there too: each takes
// its own group, derived from its id, probing a few if one is taken.
func (m *monitor) openReader(netnsFD int, plan *netpolicy.Plan, shared bool) {
	tries := 1
	if shared {
		tries = 16
		plan.LogGroup = sharedLogGroup(m.op.id)
	}
	var err error
	for i := 0; i < tries; i++ {
		if m.rd, err = nflog.Open(netnsFD, plan.LogGroup); err == nil {
			return
		}
		plan.LogGroup++
	}
	m.rd = nil
	m.op.logger(context.Background()).WithError(err).Warn("NFLOG unavailable: denied attempts will be counted, not listed")
}

// sharedLogGroup spreads operations over groups 10000..59999.
func sharedLogGroup(opID string) uint16 {
	var h uint32
	for _, c := range opID {
		h = h*31 + uint32(c)
	}
	return uint16(10000 + h%50000)
}

// start runs the reader and the sensors until stop. init is the task's
// init, just started.
func (m *monitor) start(netnsFD int, plan *netpolicy.Plan, init cgroup.Proc) {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	if m.rd != nil {
		ch := make(chan nflog.Attempt, 256)
		m.wg.Add(1)
		go func() { defer m.wg.Done(); m.rd.Run(ctx, ch); close(ch) }()
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
	m.run(func() error {
		return evidence.NewTableWatcher(netnsFD, plan).Run(ctx, func(d evidence.Drift) {
			m.emit(m.wd.TableDrift(d.Detail, d.At, time.Now()))
		})
	})
	m.run(func() error {
		return evidence.NewFlowPoller(netnsFD).Run(ctx, m.wd.Watched, func(r evidence.Reach) {
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
	if h, err := cgroup.Find(); err == nil {
		m.bind = evidence.NewBindingPoller(h, plan.Cgroup, init)
		m.op.logger(ctx).WithField("scope", m.bind.Scope()).Debug("binding sensor follows the container's processes")
		m.run(func() error { return m.bind.Run(ctx, m.unbound) })
	} else {
		m.op.logger(ctx).WithError(err).Warn("no cgroup2 mount: processes leaving the bound cgroup are not seen")
	}
}

// unbound records a binding finding: a policy_unbound event whose target,
// for an escaped process, joins the deny-then-reach watch.
func (m *monitor) unbound(u evidence.Unbound) {
	m.emit(m.wd.CgroupChanged(u.Target, u.Detail, u.At, time.Now()))
}

func (m *monitor) run(fn func() error) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := fn(); err != nil {
			m.op.logger(context.Background()).WithError(err).Warn("boundary sensor stopped")
		}
	}()
}

func (m *monitor) attempt(a nflog.Attempt) {
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

// record appends ev to the events log, publishes it and logs it. Findings
// raise the operation's attention, publish on the attention topic, log an
// error line naming the signature and run the operator's notify command.
func (m *monitor) emit(r watchdog.Result) {
	ctx := context.Background()
	for _, ev := range r.Events {
		m.record(ev)
	}
	for _, f := range r.Findings {
		if _, err := events.RaiseAttention(m.op.store, m.op.id, f); err != nil {
			m.op.logger(ctx).WithError(err).Error("raise attention")
		}
		if err := events.PublishFinding(m.op.ctx, m.pub, m.op.id, f); err != nil {
			m.op.logger(ctx).WithError(err).Warn("publish attention")
		}
		m.op.logger(ctx).WithField("signature", f.Signature).WithField("detail", f.Detail).
			Error("control_defeat: a boundary control failed; the task keeps running, attention is set")
		notify(m.op, f)
	}
}

// note records an event from a source outside the watchdog's sensors and
// folds it into the trail.
func (m *monitor) note(ev spec.Event) {
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	ev.OperationID = m.op.id
	m.record(ev)
	m.emit(m.wd.Note(ev, time.Now()))
}

func (m *monitor) record(ev spec.Event) {
	ev = events.Sanitize(ev)
	if err := m.log.Append(ev); err != nil {
		m.op.logger(context.Background()).WithError(err).Warn("append event")
	}
	if err := events.Publish(m.op.ctx, m.pub, ev); err != nil {
		m.op.logger(context.Background()).WithError(err).Warn("publish event")
	}
	m.op.logger(context.Background()).WithField("kind", ev.Kind).WithField("target", ev.Target).Debug(ev.Detail)
}

// stopSensors stops everything but the NFLOG reader: the table may now be
// read and removed by the shim without it looking like tampering.
func (m *monitor) stopSensors() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.wg.Wait()
}

// finish waits (bounded) until the reader has heard as many denied packets
// as the table counted, closes it, and returns the attempts for the
// manifest. complete is true only when every denied packet was heard and
// listed and no event was dropped.
func (m *monitor) finish(denied uint64, counted bool) spec.DeniedAttempts {
	if m.rd != nil {
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
	m.wd.End()
	if _, err := events.ClearAttention(m.op.store, m.op.id); err != nil {
		m.op.logger(context.Background()).WithError(err).Warn("clear attention at task end")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	da := spec.DeniedAttempts{Items: m.attempts}
	// Attempts from outside the cgroup (netns scope) share the deny log
	// but not its counter: with any of them, completeness is unprovable.
	da.Complete = counted && m.rd != nil && m.outside == 0 && m.seen == denied && m.rd.Lost() == 0 &&
		uint64(len(m.attempts)) == m.seen && m.log.Dropped() == 0
	return da
}

// close stops everything and closes the log; idempotent.
func (m *monitor) close() {
	m.closeOnce.Do(func() {
		m.stopSensors()
		if m.rd != nil {
			m.rd.Close()
		}
		m.log.Close()
	})
}

// notify runs the operator's notify command for a finding, bounded, with
// the finding in its environment.
func notify(op *operation, f spec.Finding) {
	argv := op.cfg.NotifyCommand
	if len(argv) == 0 {
		return
	}
	env := append(os.Environ(), "GENSEE_OPERATION_ID="+op.id, "GENSEE_CONTAINER_ID="+op.containerID,
		"GENSEE_SIGNATURE="+f.Signature, "GENSEE_DETAIL="+f.Detail)
	go runBounded(op, argv, env, 10*time.Second)
}
