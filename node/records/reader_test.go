package records

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

type fixture struct {
	t      *testing.T
	st     record.Store
	cursor string
	r      *Reader
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, st: record.Store{Dir: t.TempDir()}, cursor: filepath.Join(t.TempDir(), "node", "cursor.json")}
	f.reopen()
	return f
}

// reopen starts a new reader at the saved cursor (a restart).
func (f *fixture) reopen() {
	r, err := Open(f.st.Dir, f.cursor)
	if err != nil {
		f.t.Fatal(err)
	}
	f.r = r
}

// poll polls and commits, returning what came.
func (f *fixture) poll() []Record {
	f.t.Helper()
	recs, err := f.r.Poll()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.r.Commit(); err != nil {
		f.t.Fatal(err)
	}
	return recs
}

func refusalLine(reason string, at time.Time) string {
	b, _ := json.Marshal(spec.RefusalRecord{At: at, Namespace: "k8s.io", ContainerID: "c-" + reason, Reason: reason, Message: "m", Fix: "f",
		Kubernetes: &spec.KubernetesRef{Namespace: "team-a", Pod: "p-" + reason, PodUID: "u1"}})
	return string(b) + "\n"
}

func (f *fixture) appendRaw(path, s string) {
	f.t.Helper()
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		f.t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString(s); err != nil {
		f.t.Fatal(err)
	}
}

func reasons(recs []Record) string {
	var out []string
	for _, r := range recs {
		if rf, ok := r.(Refusal); ok {
			out = append(out, rf.Reason)
		}
	}
	return strings.Join(out, ",")
}

// TestRefusalsCursor: each refusal is returned once, across restarts; a
// line not yet ended waits for its newline; a cursor not committed is
// read again.
func TestRefusalsCursor(t *testing.T) {
	f := newFixture(t)
	p := f.st.RefusalsPath()
	if got := reasons(f.poll()); got != "" {
		t.Fatalf("no log: %q", got)
	}
	f.appendRaw(p, refusalLine("a", t0)+refusalLine("b", t0))
	half := refusalLine("c", t0)
	f.appendRaw(p, half[:20])
	if got := reasons(f.poll()); got != "a,b" {
		t.Fatalf("first poll %q, want a,b (c half-written)", got)
	}
	f.reopen()
	f.appendRaw(p, half[20:])
	if got := reasons(f.poll()); got != "c" {
		t.Fatalf("after a restart %q, want c", got)
	}
	f.appendRaw(p, refusalLine("d", t0))
	if recs, _ := f.r.Poll(); reasons(recs) != "d" {
		t.Fatalf("poll %q, want d", reasons(recs))
	}
	f.reopen() // no Commit: d comes again
	if got := reasons(f.poll()); got != "d" {
		t.Fatalf("uncommitted: %q, want d again", got)
	}
	if got := reasons(f.poll()); got != "" {
		t.Fatalf("nothing new: %q", got)
	}
}

// TestRefusalsRewritten: retention's rewrite (a new inode holding the
// newest lines) loses and repeats nothing; a log truncated below the
// cursor is read from the start; a cut past the cursor's line too.
func TestRefusalsRewritten(t *testing.T) {
	f := newFixture(t)
	p := f.st.RefusalsPath()
	f.appendRaw(p, refusalLine("a", t0)+refusalLine("b", t0)+refusalLine("c", t0))
	if got := reasons(f.poll()); got != "a,b,c" {
		t.Fatalf("%q", got)
	}
	f.appendRaw(p, refusalLine("d", t0))
	cutFirst := func(n int) func(r io.Reader) (int64, error) {
		return func(r io.Reader) (int64, error) {
			br := bufio.NewReader(r)
			var off int64
			for range n {
				l, err := br.ReadBytes('\n')
				if err != nil {
					return 0, err
				}
				off += int64(len(l))
			}
			return off, nil
		}
	}
	if _, err := f.st.TrimRefusals(cutFirst(2)); err != nil { // a, b go; c (taken), d (not) stay
		t.Fatal(err)
	}
	f.reopen()
	if got := reasons(f.poll()); got != "d" {
		t.Fatalf("after the rewrite %q, want d", got)
	}
	// Everything taken is cut, and e came meanwhile.
	f.appendRaw(p, refusalLine("e", t0))
	if _, err := f.st.TrimRefusals(cutFirst(2)); err != nil {
		t.Fatal(err)
	}
	if got := reasons(f.poll()); got != "e" {
		t.Fatalf("after a cut past the cursor %q, want e", got)
	}
	// Truncated in place below the cursor (no gensee writer does; an
	// operator might): read from the start.
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	f.appendRaw(p, refusalLine("ff", t0))
	if got := reasons(f.poll()); got != "ff" {
		t.Fatalf("after truncation %q, want ff", got)
	}
}

// TestRefusalsTornAndLong: a torn line glued to the next yields the next;
// an over-long line is skipped, the lines after it are not.
func TestRefusalsTornAndLong(t *testing.T) {
	f := newFixture(t)
	p := f.st.RefusalsPath()
	torn := refusalLine("x", t0)
	f.appendRaw(p, torn[:30]+refusalLine("a", t0))
	f.appendRaw(p, `{"at":"`+strings.Repeat("y", maxLine+10)+"\n"+refusalLine("b", t0))
	recs := f.poll()
	if got := reasons(recs); got != "a,b" {
		t.Fatalf("%q, want a,b", got)
	}
	if f.r.Malformed != 1 {
		t.Errorf("malformed %d, want 1 (the long line)", f.r.Malformed)
	}
	rf := recs[0].(Refusal)
	if rf.Kubernetes == nil || rf.Kubernetes.Pod != "p-a" {
		t.Errorf("refusal %+v lost its pod", rf)
	}
}
