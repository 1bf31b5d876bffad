package evidence

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gensee/gensee/shim/netpolicy"
)

// fakeTable is a tableSource whose read-back result the test sets. Its
// generation moves with every set, as a commit moves the kernel's.
type fakeTable struct {
	mu     sync.Mutex
	err    error
	gen    uint32
	reads  int // read-backs
	polls  int // generation reads
	gens   chan generation
	subs   int
	monErr error
}

func (f *fakeTable) set(err error) { f.mu.Lock(); f.err = err; f.gen++; f.mu.Unlock() }

func (f *fakeTable) ReadBack(context.Context) (netpolicy.Matched, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return netpolicy.Matched{}, f.err
	}
	return netpolicy.Matched{Gen: f.gen, OK: true}, nil
}

func (f *fakeTable) Generation() (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	return f.gen, nil
}

func (f *fakeTable) Close() {}

func (f *fakeTable) readBacks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *fakeTable) genReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

func (f *fakeTable) Monitor() (<-chan generation, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs++
	if f.monErr != nil {
		return nil, nil, f.monErr
	}
	f.gens = make(chan generation)
	return f.gens, func() {}, nil
}

func (f *fakeTable) monitor() chan generation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gens
}

func drift(d ...string) error { return &netpolicy.DriftError{Table: "gensee_t", Diffs: d} }

// runWatcher runs w until cleanup and returns the reports channel. The
// tests run it in a synctest bubble: the watcher's ticker and the waits
// of next and none are on the bubble's fake clock, so a loaded machine
// cannot stretch a 5 ms poll past a test's deadline.
func runWatcher(t *testing.T, w *TableWatcher) <-chan Drift {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Drift, 16)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func(d Drift) { out <- d }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return out
}

func next(t *testing.T, out <-chan Drift, within time.Duration) Drift {
	t.Helper()
	select {
	case d := <-out:
		return d
	case <-time.After(within):
		t.Fatalf("no drift reported within %v", within)
	}
	return Drift{}
}

func none(t *testing.T, out <-chan Drift, wait time.Duration) {
	t.Helper()
	select {
	case d := <-out:
		t.Fatalf("unexpected report %+v", d)
	case <-time.After(wait):
	}
}

// TestTableWatcherPolls: the read-back alone finds a drift (monitor
// messages lost), reports it once while it stays, again when it changes,
// and again after the table was back in line and drifted anew.
func TestTableWatcherPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{}
		w := &TableWatcher{Interval: 10 * time.Millisecond, src: src, now: time.Now}
		out := runWatcher(t, w)
		none(t, out, 50*time.Millisecond)
		src.set(drift("table inet gensee_t is missing"))
		if d := next(t, out, time.Second); !strings.Contains(d.Detail, "is missing") {
			t.Fatalf("drift %+v", d)
		}
		none(t, out, 50*time.Millisecond)
		src.set(drift("extra rule at position 0"))
		next(t, out, time.Second)
		src.set(nil)
		none(t, out, 50*time.Millisecond)
		src.set(drift("extra rule at position 0"))
		next(t, out, time.Second)
	})
}

// TestTableWatcherMonitor: a monitor generation touching our table checks
// at once (long poll interval), naming who changed it; a change reverted
// before the read-back is still reported.
func TestTableWatcherMonitor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{}
		out := subscribed(t, src, time.Hour)
		src.set(drift("rule 3 (gensee: deny) is missing"))
		src.monitor() <- generation{PID: 4242, Comm: "nft", Ours: []string{"rule deleted"}}
		d := next(t, out, time.Second)
		if !strings.Contains(d.Detail, "is missing") || !strings.Contains(d.Detail, `pid 4242 "nft"`) {
			t.Fatalf("drift %+v", d)
		}
		src.set(nil)
		src.monitor() <- generation{PID: 4243, Comm: "nft", Ours: []string{"new rule"}}
		if d := next(t, out, time.Second); !strings.Contains(d.Detail, "matches its plan again") {
			t.Fatalf("restore not reported: %+v", d)
		}
		// Changes to other tables trigger nothing.
		src.monitor() <- generation{PID: 1, Comm: "nft"}
		none(t, out, 30*time.Millisecond)
	})
}

// TestTableWatcherResubscribes: a closed subscription (lost messages) is
// followed by a read-back at once and a new subscription at the next poll.
func TestTableWatcherResubscribes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{}
		const interval = 10 * time.Millisecond
		subscribed(t, src, interval)
		reads := src.readBacks()
		close(src.monitor())
		synctest.Wait()
		if src.readBacks() != reads+1 {
			t.Fatalf("%d read-backs after the subscription closed, want 1", src.readBacks()-reads)
		}
		time.Sleep(interval)
		synctest.Wait()
		src.mu.Lock()
		n := src.subs
		src.mu.Unlock()
		if n != 2 {
			t.Fatalf("%d subscriptions one poll after the first closed, want 2", n)
		}
	})
}

func TestTableWatcherErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{monErr: errors.New("no monitor")}
		var mu sync.Mutex
		var errs []error
		w := &TableWatcher{Interval: 10 * time.Millisecond, src: src, now: time.Now, OnError: func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}}
		src.set(errors.New("netlink: boom"))
		out := runWatcher(t, w)
		none(t, out, 50*time.Millisecond) // a failing read-back is not a drift
		mu.Lock()
		defer mu.Unlock()
		if len(errs) == 0 {
			t.Fatal("errors not passed to OnError")
		}
	})
}

// TestTableWatcherReadsBackWhenMoved: while the generation stays, polls
// between two full read-backs only read it, and a full read-back comes at
// least every fullEvery polls; a commit brings a read-back at the next
// poll; a drift is read back every poll while it stays; without a live
// subscription every poll reads back.
func TestTableWatcherReadsBackWhenMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{}
		const interval = 5 * time.Millisecond
		w := &TableWatcher{Interval: interval, src: src, now: time.Now}
		out := runWatcher(t, w)
		none(t, out, 100*time.Millisecond)
		synctest.Wait()
		reads, polls := src.readBacks(), src.genReads()
		if reads < 2 || polls < 1 || polls > (fullEvery-1)*reads {
			t.Fatalf("unmoved for 100 ms of 5 ms polls: %d read-backs, %d generation reads; want full read-backs every %d polls and the others skipped", reads, polls, fullEvery)
		}
		src.set(nil) // a commit that left the table as planned
		time.Sleep(interval)
		synctest.Wait()
		if src.readBacks() == reads {
			t.Fatal("no read-back at the poll after the generation moved")
		}
		src.set(drift("extra rule at position 0"))
		next(t, out, time.Second)
		synctest.Wait()
		reads, polls = src.readBacks(), src.genReads()
		none(t, out, 60*time.Millisecond)
		synctest.Wait()
		if n := src.readBacks() - reads; n != 12 || src.genReads() != polls {
			t.Fatalf("a drift that stays: %d read-backs and %d skipped polls in 60 ms of 5 ms polls, want every poll (12) read back", n, src.genReads()-polls)
		}
	})
}

// TestTableWatcherMonitorDownReadsBack: with no subscription (it fails),
// no poll is skipped.
func TestTableWatcherMonitorDownReadsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{monErr: errors.New("no monitor")}
		w := &TableWatcher{Interval: 5 * time.Millisecond, src: src, now: time.Now}
		runWatcher(t, w)
		time.Sleep(60 * time.Millisecond)
		synctest.Wait()
		if src.genReads() != 0 || src.readBacks() != 1+12 {
			t.Fatalf("monitor down: %d read-backs, %d skipped polls in 60 ms of 5 ms polls; want the first and every poll (13) read back", src.readBacks(), src.genReads())
		}
	})
}

// TestTableWatcherEventsDoNotPutOffPolls: read-backs that monitor events
// bring (at times a committer chooses) do not postpone the polls' own
// full read-backs.
func TestTableWatcherEventsDoNotPutOffPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{}
		subscribed(t, src, 5*time.Millisecond)
		start := src.readBacks()
		events := 0
		for end := time.Now().Add(150 * time.Millisecond); time.Now().Before(end); events++ {
			src.monitor() <- generation{PID: 1, Comm: "nft", Unknown: 1} // a set element changed somewhere
			time.Sleep(4 * time.Millisecond)
		}
		synctest.Wait()
		if got := src.readBacks() - start; got < events+3 {
			t.Fatalf("%d read-backs for %d events in 150 ms of 5 ms polls: the polls' full read-backs were put off", got, events)
		}
	})
}

// subscribed runs a watcher on src polling every interval until cleanup,
// and returns once it has subscribed and read back. Call it in a bubble.
func subscribed(t *testing.T, src *fakeTable, interval time.Duration) <-chan Drift {
	t.Helper()
	out := runWatcher(t, &TableWatcher{Interval: interval, src: src, now: time.Now})
	synctest.Wait()
	if src.monitor() == nil {
		t.Fatal("the watcher did not subscribe")
	}
	return out
}

// TestTableWatcherSeeded: a subscription made before Run and a read-back
// under it stand for the first check: Run reads back only at the poll
// that fullEvery forces, and keeps the subscription, so a change after
// the seed is still heard at once.
func TestTableWatcherSeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{}
		w := &TableWatcher{Interval: time.Hour, src: src, now: time.Now}
		if err := w.Subscribe(); err != nil {
			t.Fatal(err)
		}
		m, _ := src.ReadBack(context.Background())
		w.Seed(m)
		out := runWatcher(t, w)
		none(t, out, 10*time.Millisecond)
		if n, s := src.readBacks(), src.subs; n != 1 || s != 1 {
			t.Fatalf("read-backs %d, subscriptions %d; want the seed's 1 and Subscribe's 1", n, s)
		}
		src.set(drift("rule 3 (gensee: deny) is missing"))
		src.monitor() <- generation{PID: 7, Comm: "nft", Ours: []string{"rule deleted"}}
		if d := next(t, out, time.Second); !strings.Contains(d.Detail, "is missing") {
			t.Fatalf("drift %+v", d)
		}
	})
}

// TestTableWatcherSeedStale: a commit between the seed's read-back and
// Run moves the generation, and Run reads back first.
func TestTableWatcherSeedStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeTable{}
		w := &TableWatcher{Interval: time.Hour, src: src, now: time.Now}
		if err := w.Subscribe(); err != nil {
			t.Fatal(err)
		}
		m, _ := src.ReadBack(context.Background())
		w.Seed(m)
		src.set(drift("extra rule at position 0"))
		out := runWatcher(t, w)
		if d := next(t, out, time.Second); !strings.Contains(d.Detail, "extra rule") {
			t.Fatalf("drift %+v", d)
		}
	})
}
