package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
)

var now = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture lays operation records out as the runtime does.
type fixture struct {
	t   *testing.T
	st  record.Store
	n   int
	now time.Time // ages count back from it
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t, st: record.Store{Dir: t.TempDir()}, now: now}
}

type opSpec struct {
	container string
	age       time.Duration // since it finished; < 0: still running (no manifest)
	deleted   bool          // cleaned marker present
	attention bool
	hostRun   bool
	staged    int // bytes of a staged product
}

// add creates one operation record and returns its id.
func (f *fixture) add(s opSpec) string {
	f.t.Helper()
	f.n++
	id := fmt.Sprintf("%032x", f.n)
	dir, err := f.st.CreateOperation(id, "default", s.container)
	if err != nil {
		f.t.Fatal(err)
	}
	created := f.now.Add(-s.age - time.Minute)
	adm := map[string]any{"operation_id": id, "namespace": "default", "container_id": s.container, "contract_id": "c1", "created_at": created}
	if err := f.st.WriteJSON(id, record.AdmissionFile, adm); err != nil {
		f.t.Fatal(err)
	}
	if s.age >= 0 {
		m := map[string]any{"operation_id": id, "contract": map[string]any{"id": "c1"}, "gate": map[string]any{"verdict": "pass"}}
		if err := f.st.WriteJSON(id, record.ManifestFile, m); err != nil {
			f.t.Fatal(err)
		}
		at := f.now.Add(-s.age)
		if err := os.Chtimes(filepath.Join(dir, record.ManifestFile), at, at); err != nil {
			f.t.Fatal(err)
		}
	}
	if s.deleted {
		f.write(filepath.Join(dir, record.CleanedMarker), "")
	}
	if s.attention {
		f.write(filepath.Join(dir, record.AttentionFile), `{"operation_id":"`+id+`","state":"control_defeat","findings":[{"signature":"table_tampered","detail":"gone","evidence":[],"at":"2026-11-21T12:00:00Z"}]}`+"\n")
	}
	if s.hostRun {
		os.MkdirAll(filepath.Join(f.st.Dir, record.HostRunsDir), 0o700)
		f.write(filepath.Join(f.st.Dir, record.HostRunsDir, id+".json"), "{}")
	}
	if s.staged > 0 {
		os.MkdirAll(filepath.Join(dir, record.StagedDir, "out"), 0o700)
		f.write(filepath.Join(dir, record.StagedDir, "out", "blob"), strings.Repeat("x", s.staged))
	}
	return id
}

func (f *fixture) write(p, data string) {
	f.t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) ids() []string {
	ids, err := f.st.Operations()
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

func TestAttentionFileIsEvents(t *testing.T) {
	if record.AttentionFile != events.AttentionFile {
		t.Fatalf("record.AttentionFile %q != events.AttentionFile %q", record.AttentionFile, events.AttentionFile)
	}
}

func TestDecide(t *testing.T) {
	day := 24 * time.Hour
	op := func(id string, age time.Duration, bytes int64, keep string) Op {
		return Op{ID: id, Finished: now.Add(-age), Bytes: bytes, Keep: keep}
	}
	ops := []Op{
		op("a", 40*day, 10, ""),
		op("b", 20*day, 10, ""),
		op("c", 10*day, 10, KeepAttention),
		op("d", 5*day, 10, ""),
		op("e", 1*day, 10, ""),
		op("f", 90*day, 10, KeepRunning),
	}
	for _, tc := range []struct {
		name string
		p    Policy
		want []string // removed ids with reasons
	}{
		{"unlimited", Policy{}, nil},
		{"age", Policy{MaxAge: 30 * day}, []string{"a:max_age"}},
		{"count", Policy{MaxCount: 4}, []string{"a:max_count", "b:max_count"}},
		{"bytes", Policy{MaxBytes: 35}, []string{"a:max_bytes", "b:max_bytes", "d:max_bytes"}},
		{"age then count", Policy{MaxAge: 30 * day, MaxCount: 4}, []string{"a:max_age", "b:max_count"}},
		{"kept records exceed the limit", Policy{MaxCount: 1}, []string{"a:max_count", "b:max_count", "d:max_count", "e:max_count"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(ops, tc.p, now)
			var got []string
			for _, r := range d.Remove {
				got = append(got, r.ID+":"+r.Reason)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("removed %v, want %v", got, tc.want)
			}
			if len(d.Kept) != 2 || d.Count != 6 || d.Bytes != 60 {
				t.Fatalf("kept %d, count %d, bytes %d", len(d.Kept), d.Count, d.Bytes)
			}
		})
	}
}

func TestRunNeverRemovesWhatMustStay(t *testing.T) {
	f := newFixture(t)
	old := 100 * 24 * time.Hour
	gone := f.add(opSpec{container: "gone", age: old, deleted: true, staged: 100})
	running := f.add(opSpec{container: "running", age: -1})
	notDeleted := f.add(opSpec{container: "exited", age: old})
	attention := f.add(opSpec{container: "flagged", age: old, deleted: true, attention: true})
	hostRun := f.add(opSpec{container: "hostrun", age: old, deleted: true, hostRun: true})
	fresh := f.add(opSpec{container: "fresh", age: time.Hour, deleted: true})

	rep, err := Run(context.Background(), f.st, Policy{MaxAge: 24 * time.Hour}, now, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || rep.Removed[0].ID != gone || rep.Removed[0].Reason != ReasonAge {
		t.Fatalf("removed %+v, want only %s for max_age", rep.Removed, gone)
	}
	if rep.Freed < 100 {
		t.Fatalf("freed %d bytes, want at least the staged 100", rep.Freed)
	}
	want := []string{running, notDeleted, attention, hostRun, fresh}
	slices.Sort(want)
	if got := f.ids(); !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	keeps := map[string]string{}
	for _, k := range rep.Kept {
		keeps[k.ID] = k.Keep
	}
	for id, why := range map[string]string{running: KeepRunning, notDeleted: KeepNotDeleted, attention: KeepAttention, hostRun: KeepHostRun} {
		if keeps[id] != why {
			t.Errorf("%s kept as %q, want %q", id, keeps[id], why)
		}
	}
	if _, err := f.st.Lookup("default", "gone"); err == nil {
		t.Fatal("the removed operation is still indexed")
	}
	if id, err := f.st.Lookup("default", "fresh"); err != nil || id != fresh {
		t.Fatalf("fresh index: %q, %v", id, err)
	}
}

func TestRunCountAndBytesOldestFirst(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, f.add(opSpec{container: fmt.Sprintf("c%d", i), age: time.Duration(10-i) * time.Hour, deleted: true, staged: 1000}))
	}
	rep, err := Run(context.Background(), f.st, Policy{MaxCount: 3}, now, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ids(); !slices.Equal(got, ids[2:]) || len(rep.Removed) != 2 {
		t.Fatalf("left %v, want the newest three %v", got, ids[2:])
	}
	rep, err = Run(context.Background(), f.st, Policy{MaxBytes: 2700}, now, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ids(); !slices.Equal(got, ids[3:]) || rep.Removed[0].Reason != ReasonBytes {
		t.Fatalf("left %v, want %v (%+v)", got, ids[3:], rep.Removed)
	}
}

func TestRunDryRunRemovesNothing(t *testing.T) {
	f := newFixture(t)
	f.add(opSpec{container: "a", age: 90 * 24 * time.Hour, deleted: true})
	f.write(f.st.RefusalsPath(), refusalLine(now.Add(-90*24*time.Hour), "old"))
	before := f.ids()
	rep, err := Run(context.Background(), f.st, Policy{MaxAge: time.Hour}, now, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || rep.Refusals.Lines != 1 {
		t.Fatalf("dry run would remove %d records and %d lines, want 1 and 1", len(rep.Removed), rep.Refusals.Lines)
	}
	if got := f.ids(); !slices.Equal(got, before) {
		t.Fatalf("dry run removed records: %v", got)
	}
	if b, _ := os.ReadFile(f.st.RefusalsPath()); len(b) == 0 {
		t.Fatal("dry run trimmed refusals.jsonl")
	}
}

// A container id reused after delete: the index points at the newest
// operation, and removing the older one leaves that entry alone.
func TestRunKeepsTheNewerIndexEntry(t *testing.T) {
	f := newFixture(t)
	old := f.add(opSpec{container: "job", age: 90 * 24 * time.Hour, deleted: true})
	newer := f.add(opSpec{container: "job", age: time.Minute})
	if _, err := Run(context.Background(), f.st, Policy{MaxAge: time.Hour}, now, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := f.ids(); !slices.Equal(got, []string{newer}) {
		t.Fatalf("left %v, want %s", got, newer)
	}
	if id, err := f.st.Lookup("default", "job"); err != nil || id != newer {
		t.Fatalf("index: %q, %v; want %s (not %s)", id, err, newer, old)
	}
	if ok, err := f.st.Unindex("default", "job", old); ok || err != nil {
		t.Fatalf("Unindex of a stale id removed the entry: %v %v", ok, err)
	}
}

// A crash after the index entry went and the directory was renamed aside
// leaves a leftover nobody lists; the next run removes it.
func TestRunFinishesACrashedRemoval(t *testing.T) {
	f := newFixture(t)
	id := f.add(opSpec{container: "a", age: 90 * 24 * time.Hour, deleted: true, staged: 10})
	keep := f.add(opSpec{container: "b", age: time.Minute, deleted: true})
	if _, err := f.st.Unindex("default", "a", id); err != nil {
		t.Fatal(err)
	}
	dir, _ := f.st.OperationDir(id)
	aside := filepath.Join(filepath.Dir(dir), ".removing-"+id)
	if err := os.Rename(dir, aside); err != nil {
		t.Fatal(err)
	}
	if got := f.ids(); !slices.Equal(got, []string{keep}) {
		t.Fatalf("a removal under way is listed: %v", got)
	}
	if _, err := Run(context.Background(), f.st, Policy{MaxAge: time.Hour}, now, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(aside); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover %s still there: %v", aside, err)
	}
	if got := f.ids(); !slices.Equal(got, []string{keep}) {
		t.Fatalf("left %v", got)
	}
}

// TestRunBusy: without Wait a held lock is ErrBusy at once; with it, Run
// retries until its context's deadline, and takes a lock released before
// then. The retries' timer and the deadline are on the bubble's clock; the
// lock is a non-blocking flock.
func TestRunBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		unlock, err := lock(context.Background(), f.st, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(context.Background(), f.st, Policy{MaxCount: 1}, now, Options{}); !errors.Is(err, ErrBusy) {
			t.Fatalf("err = %v, want ErrBusy", err)
		}
		const deadline = 250 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		if _, err := Run(ctx, f.st, Policy{MaxCount: 1}, now, Options{Wait: true}); !errors.Is(err, ErrBusy) {
			t.Fatalf("waiting: err = %v, want ErrBusy after the deadline", err)
		}
		if d := time.Since(start); d != deadline {
			t.Fatalf("waiting: gave up after %v, want at the %v deadline", d, deadline)
		}
		const release = 150 * time.Millisecond
		go func() {
			time.Sleep(release)
			unlock()
		}()
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start = time.Now()
		if _, err := Run(ctx, f.st, Policy{MaxCount: 1}, now, Options{Wait: true}); err != nil {
			t.Fatalf("waiting for a lock released after %v: %v", release, err)
		}
		if d := time.Since(start); d < release || d > release+time.Second {
			t.Fatalf("waiting: took the lock after %v, want soon after its release at %v", d, release)
		}
	})
}

func TestBackgroundRuns(t *testing.T) {
	f := newFixture(t)
	f.now = time.Now() // Background runs on the real clock
	f.add(opSpec{container: "a", age: 90 * 24 * time.Hour, deleted: true})
	id := f.add(opSpec{container: "b", age: -1})
	Background(context.Background(), f.st, Policy{MaxAge: time.Hour}, nil)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got := f.ids(); slices.Equal(got, []string{id}) {
			if _, err := os.Stat(filepath.Join(f.st.Dir, stampFile)); err == nil {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("background run left %v", f.ids())
}

func refusalLine(at time.Time, reason string) string {
	b, _ := json.Marshal(map[string]any{"at": at, "namespace": "default", "container_id": "x", "reason": reason, "message": "m"})
	return string(b) + "\n"
}

func readLines(t *testing.T, p string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestTrimRefusals(t *testing.T) {
	line := refusalLine(now, "new1")
	for _, tc := range []struct {
		name      string
		p         Policy
		wantLines []string // reasons left
	}{
		{"age", Policy{MaxAge: 24 * time.Hour}, []string{"new1", "new2", "new3"}},
		{"count", Policy{MaxCount: 2}, []string{"new2", "new3"}},
		{"bytes", Policy{MaxBytes: int64(2*len(line) + 3)}, []string{"new2", "new3"}},
		{"unlimited", Policy{}, []string{"old1", "old2", "new1", "new2", "new3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var all string
			for i, r := range []string{"old1", "old2", "new1", "new2", "new3"} {
				at := now.Add(-time.Duration(5-i) * time.Minute)
				if strings.HasPrefix(r, "old") {
					at = now.Add(-48 * time.Hour)
				}
				all += refusalLine(at, r)
			}
			f.write(f.st.RefusalsPath(), all)
			tr, err := TrimRefusals(f.st, tc.p, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range readLines(t, f.st.RefusalsPath()) {
				var v struct{ Reason string }
				json.Unmarshal([]byte(l), &v)
				got = append(got, v.Reason)
			}
			if !slices.Equal(got, tc.wantLines) || tr.Kept != int64(len(tc.wantLines)) || tr.Lines != int64(5-len(tc.wantLines)) {
				t.Fatalf("left %v (%+v), want %v", got, tr, tc.wantLines)
			}
		})
	}
}

// A refusal line longer than the reader's 64 KiB buffer is judged by its
// own time like any other: a new one stays under MaxAge.
func TestTrimRefusalsLongLine(t *testing.T) {
	f := newFixture(t)
	long := refusalLine(now, strings.Repeat("x", 100<<10))
	f.write(f.st.RefusalsPath(), refusalLine(now.Add(-48*time.Hour), "old")+long+long)
	tr, err := TrimRefusals(f.st, Policy{MaxAge: 24 * time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Lines != 1 || tr.Kept != 2 {
		t.Fatalf("%+v, want the old line dropped and both long new ones kept", tr)
	}
}

// Appends racing with trims: every line appended after the old ones is
// still there at the end.
func TestTrimRefusalsLosesNoAppend(t *testing.T) {
	f := newFixture(t)
	for range 50 {
		if err := f.st.AppendRefusal(map[string]any{"at": now.Add(-48 * time.Hour), "reason": "old"}); err != nil {
			t.Fatal(err)
		}
	}
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := f.st.AppendRefusal(map[string]any{"at": now, "reason": fmt.Sprintf("w%d-%d", w, i)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := TrimRefusals(f.st, Policy{MaxAge: time.Hour}, now); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	if _, err := TrimRefusals(f.st, Policy{MaxAge: time.Hour}, now); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, f.st.RefusalsPath())
	if len(lines) != writers*each {
		t.Fatalf("%d lines left, want the %d new ones", len(lines), writers*each)
	}
	for _, l := range lines {
		if strings.Contains(l, `"old"`) {
			t.Fatalf("an old line survived: %s", l)
		}
	}
}

// TestClearedFindingsDoNotKeep: an operation whose findings a person
// cleared is pruned like any other; an open one, or a record that does
// not parse, keeps it.
func TestClearedFindingsDoNotKeep(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		body string
		keep bool
	}{
		{`{"state":"control_defeat","findings":[{"signature":"table_tampered","at":"2026-11-21T12:00:00Z","cleared":{"by":"uid 0","at":"2026-11-22T12:00:00Z"}}]}`, false},
		{`{"state":"control_defeat","findings":[{"signature":"table_tampered","at":"2026-11-21T12:00:00Z"}]}`, true},
		{`{"state": "control_defeat", "findings": [`, true},
	} {
		if err := os.WriteFile(filepath.Join(dir, record.AttentionFile), []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := openFindings(dir); got != c.keep {
			t.Errorf("%s: open %v, want %v", c.body, got, c.keep)
		}
	}
}
