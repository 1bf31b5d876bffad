package events

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gensee/gensee/spec"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func denied(i int) spec.Event {
	return spec.Event{
		Kind: spec.EventEgressDenied, Control: "network", Rule: "deny_all",
		Target: "198.51.100.7:80/tcp", At: t0.Add(time.Duration(i) * time.Millisecond),
		OperationID: "0f3a9c1d2e4b5a697887766554433221",
	}
}

func openT(t *testing.T, path string, limit int64) *Log {
	t.Helper()
	l, err := OpenLog(path, limit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLogAppendRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, 0)
	e := denied(0)
	e.Detail = "connect with Authorization: Bearer abc.def.ghi\nsecond line"
	if err := l.Append(e); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(denied(1)); err != nil {
		t.Fatal(err)
	}
	c, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Events) != 2 || c.Dropped != 0 || c.Malformed != 0 {
		t.Fatalf("Read = %+v", c)
	}
	if d := c.Events[0].Detail; strings.Contains(d, "abc.def") || strings.Contains(d, "\n") {
		t.Errorf("detail not sanitized: %q", d)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode())
	}
}

func TestLogRejectsInvalid(t *testing.T) {
	l := openT(t, filepath.Join(t.TempDir(), "events.jsonl"), 0)
	if err := l.Append(spec.Event{Kind: "nope", Control: "x", At: t0}); err == nil {
		t.Fatal("unknown kind appended")
	}
}

// TestLogBounded: past the limit events are counted, not written, and the
// count survives a reopen (a restarted shim).
func TestLogBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, 1000)
	for i := range 50 {
		if err := l.Append(denied(i)); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := os.Stat(path)
	if st.Size() > 1000 {
		t.Fatalf("log is %d bytes, limit 1000", st.Size())
	}
	c, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Events) == 0 || uint64(len(c.Events))+c.Dropped != 50 || c.Dropped != l.Dropped() {
		t.Fatalf("written %d + dropped %d (log says %d), want 50", len(c.Events), c.Dropped, l.Dropped())
	}
	l.Close()
	if err := l.Append(denied(51)); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Append after Close = %v", err)
	}
	l2 := openT(t, path, 1000)
	if err := l2.Append(denied(52)); err != nil {
		t.Fatal(err)
	}
	if l2.Dropped() != c.Dropped+1 {
		t.Errorf("reopened dropped = %d, want %d", l2.Dropped(), c.Dropped+1)
	}
}

// TestLogReservesFindings: routine events fill the log only up to its
// limit less the reserve; a control_defeat after them is still written,
// and the routine ones past the reserve are counted as dropped.
func TestLogReservesFindings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	const limit = 16 << 10
	l := openT(t, path, limit)
	for i := range 1000 {
		if err := l.Append(denied(i)); err != nil {
			t.Fatal(err)
		}
	}
	if l.Dropped() == 0 {
		t.Fatal("the routine events never filled the log")
	}
	defeat := spec.Event{Kind: spec.EventControlDefeat, Control: "watchdog", Rule: "deny_then_reach",
		Target: "198.51.100.7:80/tcp", Detail: "reached", At: t0, OperationID: "0f3a9c1d2e4b5a697887766554433221"}
	if err := l.Append(defeat); err != nil {
		t.Fatal(err)
	}
	c, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if last := c.Events[len(c.Events)-1]; last.Kind != spec.EventControlDefeat {
		t.Fatalf("the control_defeat after a full log was not written (last %s, dropped %d)", last.Kind, c.Dropped)
	}
	if st, _ := os.Stat(path); st.Size() > limit {
		t.Fatalf("log is %d bytes, limit %d", st.Size(), limit)
	}
}

// TestLogTornLine: a line a crashed writer left unterminated is sealed off
// and skipped; later events read fine.
func TestLogTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte(`{"kind":"egress_denied","cont`), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openT(t, path, 0)
	if err := l.Append(denied(0)); err != nil {
		t.Fatal(err)
	}
	c, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Events) != 1 || c.Malformed != 1 {
		t.Fatalf("Read = %d events, %d malformed; want 1, 1", len(c.Events), c.Malformed)
	}
}

func TestLogConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, 0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				if err := l.Append(denied(g*100 + i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	c, err := Read(path)
	if err != nil || len(c.Events) != 100 || c.Malformed != 0 {
		t.Fatalf("Read = %d events, %d malformed, %v", len(c.Events), c.Malformed, err)
	}
}

func TestReadMissing(t *testing.T) {
	if _, err := Read(filepath.Join(t.TempDir(), "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read missing = %v", err)
	}
}

func TestReadSkipsLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	long := strings.Repeat("x", spec.MaxEventBytes+10)
	if err := os.WriteFile(path, []byte(long+"\n"+`{"kind":"admission_denied","control":"admission","at":"2026-11-29T10:00:00Z"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Read(path)
	if err != nil || len(c.Events) != 1 || c.Malformed != 1 {
		t.Fatalf("Read = %+v, %v", c, err)
	}
}

// TestFollow: existing events, then appended ones, in order; a log created
// after Follow started is picked up at the next poll; cancel ends it with
// nil. Follow's ticker is on the bubble's clock; its reads are of a regular
// file, which return at once.
func TestFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "events.jsonl")
		ctx, cancel := context.WithCancel(t.Context()) // t.Context ends Follow if the test fails first
		got := make(chan spec.Event, 10)
		done := make(chan error, 1)
		const interval = 10 * time.Millisecond
		go func() {
			done <- Follow(ctx, path, interval, func(e spec.Event) error { got <- e; return nil })
		}()
		time.Sleep(3 * interval) // polls find no log yet
		synctest.Wait()
		l := openT(t, path, 0)
		for i := range 3 {
			if err := l.Append(denied(i)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(interval)
		synctest.Wait()
		if len(got) != 3 {
			t.Fatalf("%d events followed at the poll after the log appeared, want 3", len(got))
		}
		for i := range 3 {
			if e := <-got; !e.At.Equal(denied(i).At) {
				t.Fatalf("event %d at %v, want %v", i, e.At, denied(i).At)
			}
		}
		if err := l.Append(denied(3)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval)
		synctest.Wait()
		if len(got) != 1 {
			t.Fatalf("%d events followed at the poll after an append, want 1", len(got))
		}
		if e := <-got; !e.At.Equal(denied(3).At) {
			t.Fatalf("appended event at %v, want %v", e.At, denied(3).At)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Follow = %v", err)
		}
	})
}

func TestFollowStopsOnCallbackError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l := openT(t, path, 0)
	l.Append(denied(0))
	l.Append(denied(1))
	stop := errors.New("stop")
	n := 0
	err := Follow(context.Background(), path, time.Millisecond, func(spec.Event) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Follow = %v after %d events", err, n)
	}
}

// AppendDeferred writes the line at once (readers see it) and leaves the
// fsync to the next Append or Close.
func TestLogAppendDeferred(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := OpenLog(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AppendDeferred(denied(0)); err != nil {
		t.Fatal(err)
	}
	if !l.dirty {
		t.Fatal("a deferred append left the log clean")
	}
	if c, err := Read(path); err != nil || len(c.Events) != 1 {
		t.Fatalf("Read after a deferred append = %+v, %v", c, err)
	}
	if err := l.AppendDeferred(denied(1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(denied(2)); err != nil || l.dirty {
		t.Fatalf("Append after a deferred one = %v, dirty %v", err, l.dirty)
	}
	if err := l.AppendDeferred(denied(3)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.AppendDeferred(denied(4)); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("AppendDeferred after Close = %v, want ErrClosed", err)
	}
	if c, err := Read(path); err != nil || len(c.Events) != 4 {
		t.Fatalf("Read = %+v, %v; want 4 events", c, err)
	}
}
