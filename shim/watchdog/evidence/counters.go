package evidence

import (
	"context"
	"time"

	"github.com/gensee/gensee/shim/netpolicy"
)

// CounterMove is how much the table's counters grew since the last poll.
type CounterMove struct {
	At       time.Time
	Allowed  netpolicy.Count // growth of the allow counter: progress (ends a denial loop)
	Denied   netpolicy.Count // growth of the deny counter
	Counters netpolicy.Counters
}

// CounterPoller reports the table's counters moving. The counters are the
// authoritative count of allowed and denied packets; NFLOG only samples.
type CounterPoller struct {
	Interval time.Duration   // DefaultInterval if 0
	OnError  func(err error) // optional: read failures (a vanished table is the TableWatcher's to report)
	read     func(ctx context.Context) (netpolicy.Counters, error)
	now      func() time.Time
}

// NewCounterPoller polls plan p's counters in the namespace netnsFD refers to.
func NewCounterPoller(netnsFD int, p *netpolicy.Plan) *CounterPoller {
	return &CounterPoller{
		read: func(ctx context.Context) (netpolicy.Counters, error) { return netpolicy.ReadCounters(ctx, netnsFD, p) },
		now:  time.Now,
	}
}

// Run polls until ctx is done (then it returns nil), calling report on its
// goroutine when a counter grew. The baseline is zero: the table is new
// when its operation's sensors start, so packets counted before the first
// read (an allowed flow in the workload's first milliseconds, while the
// sensors were still starting) are growth too, never hidden in a baseline.
func (p *CounterPoller) Run(ctx context.Context, report func(CounterMove)) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := &netpolicy.Counters{}
	for {
		c, err := p.read(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil && p.OnError != nil {
				p.OnError(err)
			}
		default:
			m := CounterMove{At: p.now(), Allowed: grew(last.Allowed, c.Allowed), Denied: grew(last.Denied, c.Denied), Counters: c}
			if m.Allowed.Packets > 0 || m.Denied.Packets > 0 {
				report(m)
			}
			last = &c
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// grew is b-a, or b when the counter went backwards (reset, or a table
// recreated: the TableWatcher reports that).
func grew(a, b netpolicy.Count) netpolicy.Count {
	if b.Packets < a.Packets || b.Bytes < a.Bytes {
		return b
	}
	return netpolicy.Count{Packets: b.Packets - a.Packets, Bytes: b.Bytes - a.Bytes}
}
