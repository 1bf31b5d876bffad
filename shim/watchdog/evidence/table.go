package evidence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/netpolicy"
)

// DefaultInterval is how often sensors poll. With it a table change the
// monitor missed is still reported well within 2 s.
const DefaultInterval = 500 * time.Millisecond

// Drift is one change of the table's state.
type Drift struct {
	At     time.Time
	Detail string // what differs from the plan and, when the monitor saw it, who changed it
}

// TableWatcher reports when the operation's table stops matching its plan,
// or is changed and changed back. Stop it before the shim itself changes
// or removes the table: while it runs, every change is someone else's.
type TableWatcher struct {
	Interval time.Duration    // read-back period; DefaultInterval if 0
	OnError  func(err error)  // optional: read-back and monitor failures, for the log
	src      tableSource      // guarded by Run: one Run at a time
	now      func() time.Time // clock of the reports
	from     netpolicy.Matched
}

// tableSource is the watcher's seam to the kernel.
type tableSource interface {
	// ReadBack compares the live table with the plan (a
	// *netpolicy.DriftError when they differ) and says at which
	// generation of the namespace's nf_tables it matched.
	ReadBack(ctx context.Context) (netpolicy.Matched, error)
	// Generation is the namespace's nf_tables generation id now.
	Generation() (uint32, error)
	// Monitor subscribes to ruleset changes in the namespace. The channel
	// closes when the subscription ends (stop, or messages were lost).
	Monitor() (gens <-chan generation, stop func(), err error)
	// Close releases what the source holds; Run calls it on return.
	Close()
}

// From says the table read back equal to its plan at m (the install's
// read-back): Run's first read-back is skipped if no commit happened in
// the namespace since then. Call it before Run.
func (w *TableWatcher) From(m netpolicy.Matched) { w.from = m }

// generation is one committed ruleset change as the monitor reports it.
type generation struct {
	PID     uint32
	Comm    string
	Ours    []string // changes to objects of our table, e.g. "NEWRULE"
	Unknown int      // changes whose table the monitor does not name (set elements)
}

// NewTableWatcher watches plan p's table in the namespace netnsFD refers to.
func NewTableWatcher(netnsFD int, p *netpolicy.Plan) *TableWatcher {
	return &TableWatcher{src: &kernelTable{netnsFD: netnsFD, plan: p}, now: time.Now}
}

// Run watches until ctx is done and returns nil then. A read-back that
// matched the plan is not repeated while the namespace's nf_tables
// generation stays where it was (no commit of any table since): a poll
// then only reads the generation. report is called on
// Run's goroutine, once per change: a drift is reported when it appears or
// changes, not again while it stays; a change the monitor saw that left the
// table equal to its plan is reported too.
func (w *TableWatcher) Run(ctx context.Context, report func(Drift)) error {
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var (
		gens    <-chan generation
		stop    = func() {}
		shown   string   // the drift last reported; "" while the table matches
		matched = w.from // where the table last matched its plan
	)
	defer func() { stop() }()
	defer w.src.Close()
	// unmoved: no commit since the table last matched its plan.
	unmoved := func() bool {
		if !matched.OK {
			return false
		}
		gen, err := w.src.Generation()
		return err == nil && gen == matched.Gen
	}
	subscribe := func() {
		g, s, err := w.src.Monitor()
		if err != nil {
			w.fail(fmt.Errorf("watch table: %w", err))
			return
		}
		gens, stop = g, s
	}
	check := func(g *generation) {
		m, err := w.src.ReadBack(ctx)
		matched = m
		var d *netpolicy.DriftError
		switch {
		case errors.As(err, &d):
			if what := d.Error(); what != shown {
				shown = what
				report(Drift{At: w.now(), Detail: what + g.by()})
			}
		case err != nil:
			if ctx.Err() == nil {
				w.fail(fmt.Errorf("watch table: %w", err))
			}
		default:
			if g != nil && len(g.Ours) > 0 {
				report(Drift{At: w.now(), Detail: fmt.Sprintf("table changed (%s)%s and now matches its plan again", strings.Join(g.Ours, ", "), g.by())})
			}
			shown = ""
		}
	}
	subscribe()
	// Subscribed: a commit from now on is an event, and one since the
	// install's read-back (from) has moved the generation.
	if !unmoved() {
		check(nil)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case g, ok := <-gens:
			if !ok {
				stop()
				gens, stop = nil, func() {} // messages may be lost: resubscribe, read back
				check(nil)
				continue
			}
			if len(g.Ours) > 0 || g.Unknown > 0 {
				check(&g)
			}
		case <-t.C:
			if gens == nil {
				subscribe()
			}
			if !unmoved() {
				check(nil)
			}
		}
	}
}

func (w *TableWatcher) fail(err error) {
	if w.OnError != nil {
		w.OnError(err)
	}
}

// by names who made generation g, if known. A generation that touched our
// table by name made the change; one that only may have (set elements)
// coincided with it.
func (g *generation) by() string {
	switch {
	case g == nil || g.PID == 0:
		return ""
	case len(g.Ours) > 0:
		return fmt.Sprintf(" (by pid %d %q)", g.PID, g.Comm)
	}
	return fmt.Sprintf(" (seen with a change by pid %d %q)", g.PID, g.Comm)
}
