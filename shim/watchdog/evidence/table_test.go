package evidence

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
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
	return f.gen, nil
}

func (f *fakeTable) Close() {}

func (f *fakeTable) readBacks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
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

// runWatcher runs w until cleanup and returns the reports channel.
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
}

// TestTableWatcherMonitor: a monitor generation touching our table checks
// at once (long poll interval), naming who changed it; a change reverted
// before the read-back is still reported.
func TestTableWatcherMonitor(t *testing.T) {
	src := &fakeTable{}
	w := &TableWatcher{Interval: time.Hour, src: src, now: time.Now}
	out := runWatcher(t, w)
	for src.monitor() == nil {
		time.Sleep(time.Millisecond)
	}
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
}

// TestTableWatcherResubscribes: a closed subscription (lost messages) is
// followed by a read-back and a new subscription.
func TestTableWatcherResubscribes(t *testing.T) {
	src := &fakeTable{}
	w := &TableWatcher{Interval: 10 * time.Millisecond, src: src, now: time.Now}
	runWatcher(t, w)
	for src.monitor() == nil {
		time.Sleep(time.Millisecond)
	}
	close(src.monitor())
	deadline := time.Now().Add(time.Second)
	for {
		src.mu.Lock()
		n := src.subs
		src.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("did not resubscribe")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTableWatcherErrors(t *testing.T) {
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
}

// TestTableWatcherReadsBackWhenMoved: a read-back that matched is not
// repeated while the namespace's generation stays; a commit (the
// generation moving) brings one more read-back, and a drift is read back
// every poll while it stays.
func TestTableWatcherReadsBackWhenMoved(t *testing.T) {
	src := &fakeTable{}
	w := &TableWatcher{Interval: 5 * time.Millisecond, src: src, now: time.Now}
	out := runWatcher(t, w)
	none(t, out, 60*time.Millisecond)
	if n := src.readBacks(); n != 1 {
		t.Fatalf("%d read-backs with the generation unmoved, want the first alone", n)
	}
	src.set(nil) // a commit that left the table as planned
	none(t, out, 60*time.Millisecond)
	if n := src.readBacks(); n != 2 {
		t.Fatalf("%d read-backs after one commit, want 2", n)
	}
	src.set(drift("extra rule at position 0"))
	next(t, out, time.Second)
	before := src.readBacks()
	none(t, out, 60*time.Millisecond)
	if n := src.readBacks(); n < before+3 {
		t.Fatalf("a drift that stays was read back %d times in 60 ms of 5 ms polls, want every poll", n-before)
	}
}

// TestTableWatcherFrom: a watcher told where the install's read-back
// matched (From) skips its first read-back while no commit happened since,
// and makes it when one did.
func TestTableWatcherFrom(t *testing.T) {
	for _, c := range []struct {
		name  string
		from  netpolicy.Matched
		reads bool
	}{
		{"unmoved", netpolicy.Matched{Gen: 3, OK: true}, false},
		{"moved", netpolicy.Matched{Gen: 2, OK: true}, true},
		{"unknown", netpolicy.Matched{Gen: 3}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := &fakeTable{gen: 3}
			w := &TableWatcher{Interval: time.Hour, src: src, now: time.Now}
			w.From(c.from)
			out := runWatcher(t, w)
			none(t, out, 30*time.Millisecond)
			if got := src.readBacks() > 0; got != c.reads {
				t.Fatalf("read back: %v, want %v", got, c.reads)
			}
		})
	}
}
