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
// monitor missed is still reported within 2 s: at the next poll if it
// moved the namespace's nf_tables generation, else at the next full
// read-back (fullEvery).
const DefaultInterval = 500 * time.Millisecond

// fullEvery is how many polls at most pass between two read-backs of the
// table, whether or not the generation moved. An unmoved generation only
// says no transaction committed: a dump is lock-free, so a read-back may
// have seen a batch's in-place change that then aborted, or a commit's
// state before it was applied (both leave the generation where the dump
// saw it). Such a read-back is never trusted for longer than this.
const fullEvery = 3

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
	// A subscription made before Run (Subscribe) and the read-back made
	// under it (Seed), which Run takes over.
	gens <-chan generation
	stop func()
	seed netpolicy.Matched
}

// Subscribe subscribes to the namespace's ruleset changes now, ahead of
// Run, which takes the subscription over. Call it once the table is
// committed (its own commit is not a change) and before the read-back
// handed to Seed: every commit after that read-back is then an event Run
// hears, so the read-back stands for Run's first check. Without Run,
// Close releases it.
func (w *TableWatcher) Subscribe() error {
	g, s, err := w.src.Monitor()
	if err != nil {
		return fmt.Errorf("watch table: %w", err)
	}
	w.gens, w.stop = g, s
	return nil
}

// DialAhead starts opening Subscribe's connection in the namespace now,
// beside the caller's commit: Subscribe, due between the commit and the
// read-back, then only joins the change group on it.
func (w *TableWatcher) DialAhead() {
	if k, ok := w.src.(*kernelTable); ok && k.ahead == nil {
		k.dialAhead()
	}
}

// Seed hands Run the read-back made under Subscribe's subscription (an
// unknown generation, or none, and Run reads back first itself).
func (w *TableWatcher) Seed(m netpolicy.Matched) { w.seed = m }

// Close releases a subscription Run did not take over.
func (w *TableWatcher) Close() {
	if w.stop != nil {
		w.stop()
		w.gens, w.stop = nil, nil
	}
	w.src.Close()
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

// Run watches until ctx is done and returns nil then. A poll reads the
// table back when the namespace's nf_tables generation moved since the
// last read-back that matched, when the monitor was not subscribed for
// all of that time, and in any case every fullEvery polls; the other polls
// only read the generation. report is called on
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
		shown   string            // the drift last reported; "" while the table matches
		matched netpolicy.Matched // where the last read-back matched, subscribed throughout
		skipped int               // polls since the last read-back not brought by an event
	)
	defer func() { stop() }()
	defer w.src.Close()
	// skip: this poll need not read back. The last read-back matched
	// under a live subscription, the generation has not moved since, and
	// the polls' last read-back is less than fullEvery polls old.
	skip := func() bool {
		if !matched.OK || gens == nil || skipped+1 >= fullEvery {
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
		subscribed := gens != nil
		m, err := w.src.ReadBack(ctx)
		matched = m
		if g == nil {
			// Only a poll's own read-back restarts the count: one an
			// event brought came when a committer chose.
			skipped = 0
		}
		if !subscribed {
			matched = netpolicy.Matched{} // a commit meanwhile may have gone unseen
		}
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
	if w.gens != nil {
		gens, stop = w.gens, w.stop
		w.gens, w.stop = nil, nil
	} else {
		subscribe()
	}
	// The seed is a read-back under this subscription, as good as a
	// poll's own: the first check reads back only if the generation moved
	// since it.
	if matched = w.seed; !skip() {
		check(nil)
	} else {
		skipped++
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
			if skip() {
				skipped++
				continue
			}
			check(nil)
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
