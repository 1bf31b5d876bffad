package records

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// mkOps creates n operations (ids 1..n), admitted and, if bound, bound.
func mkOps(t *testing.T, f *fixture, n int, bound bool) []string {
	t.Helper()
	adm := spec.Admission{Namespace: "k8s.io", ContainerID: "c1",
		Kubernetes: &spec.KubernetesRef{Namespace: "team-a", Pod: "web-0", PodUID: "u1", Container: "app"},
		AdmissionDecision: spec.AdmissionDecision{Selector: "ci", ContractID: "build",
			Contract: spec.Contract{ID: "build", Products: []spec.Product{{Class: "structured_result", Slot: "out/result.json"}}}}}
	if bound {
		adm.Subject = &spec.Subject{InitPID: 1}
	}
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%032x", i+1)
		if _, err := f.st.CreateOperation(id, "k8s.io", fmt.Sprintf("c%d", i)); err != nil {
			t.Fatal(err)
		}
		adm.OperationID = id
		if err := f.st.WriteJSON(id, record.AdmissionFile, adm); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// denials writes an events.jsonl of about size bytes of distinct egress
// denials (Detail: the operation and the line's number) in operation id's
// directory; it returns how many.
func denials(t *testing.T, f *fixture, id string, size int) int {
	t.Helper()
	var sb strings.Builder
	n := 0
	for sb.Len() < size {
		b, _ := json.Marshal(spec.Event{Kind: spec.EventEgressDenied, Control: "network", Target: "10.0.0.1:443/tcp",
			Rule: "deny", Detail: fmt.Sprintf("%s/%d/%s", id, n, strings.Repeat("d", 120)), At: t0})
		sb.Write(b)
		sb.WriteByte('\n')
		n++
	}
	dir, _ := f.st.OperationDir(id)
	if err := os.WriteFile(filepath.Join(dir, record.EventsFile), []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPollBudget: a backlog far larger than one Poll's budget (a first
// start over 40 operations' 1 MiB event logs) is read over several Polls,
// each holding at most pollLines records and a bounded heap; across them,
// and across a restart midway, every denial comes exactly once.
func TestPollBudget(t *testing.T) {
	f := newFixture(t)
	ids := mkOps(t, f, 40, true)
	want := 0
	for _, id := range ids {
		want += denials(t, f, id, 1<<20)
	}
	seen := map[string]int{}
	admissions, polls := 0, 0
	var maxLive int64
	// The heap live while one Poll's records are held, above what is
	// live between Polls (the test's own tally grows).
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	for ; polls == 0 || f.r.More; polls++ {
		if polls > 100 {
			t.Fatalf("not drained after %d polls", polls)
		}
		if polls == 5 {
			f.reopen() // a restart: on from the committed cursor
		}
		recs := f.poll()
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		live := int64(m.HeapAlloc) - int64(base.HeapAlloc)
		if live > 24<<20 {
			t.Fatalf("poll %d: %d records, %d MiB live while held", polls, len(recs), live>>20)
		}
		maxLive = max(maxLive, live)
		if len(recs) > pollLines+len(ids) {
			t.Fatalf("poll %d: %d records", polls, len(recs))
		}
		for _, r := range recs {
			switch r := r.(type) {
			case EgressDenied:
				seen[r.Event.Detail]++
			case Admission:
				admissions++
			}
		}
		recs = nil
		runtime.GC()
		runtime.ReadMemStats(&base) // without them: the next Poll's base
	}
	t.Logf("%d denials in %d polls, at most %d KiB live while held", want, polls, maxLive>>10)
	if polls < 10 {
		t.Fatalf("read in %d polls: the budget did not bound them", polls)
	}
	for d, n := range seen {
		if n != 1 {
			t.Fatalf("%.40s came %d times", d, n)
		}
	}
	if len(seen) != want || admissions != len(ids) || f.r.Malformed != 0 {
		t.Fatalf("%d denials of %d, %d admissions of %d, %d malformed", len(seen), want, admissions, len(ids), f.r.Malformed)
	}
	if got := f.poll(); len(got) != 0 {
		t.Fatalf("drained, then %d records", len(got))
	}
}

// TestPollBudgetHugeLine: a line longer than the whole budget is passed
// over in pieces, one Poll at a time, never stalling the log; the line
// after it comes once.
func TestPollBudgetHugeLine(t *testing.T) {
	f := newFixture(t)
	p := f.st.RefusalsPath()
	f.appendRaw(p, refusalLine("a", t0)+`{"at":"`+strings.Repeat("y", 3*pollBytes)+"\"}\n"+refusalLine("b", t0))
	var got string
	for i := 0; i == 0 || f.r.More; i++ {
		if i > 10 {
			t.Fatal("stalled")
		}
		got += reasons(f.poll())
	}
	if got += reasons(f.poll()); got != "ab" || f.r.Malformed != 1 {
		t.Fatalf("refusals %q, malformed %d", got, f.r.Malformed)
	}
}

// TestPollBudgetGate: an operation's gate verdicts come after all its
// denials, in the Poll that reads the last of them or later.
func TestPollBudgetGate(t *testing.T) {
	f := newFixture(t)
	ids := mkOps(t, f, 1, true)
	want := denials(t, f, ids[0], 3*pollBytes)
	if err := f.st.WriteJSON(ids[0], record.ManifestFile, spec.Manifest{OperationID: ids[0], Gate: spec.GateResult{Verdict: spec.VerdictPass}}); err != nil {
		t.Fatal(err)
	}
	egress, gates := 0, 0
	for i := 0; i < 20 && gates == 0; i++ {
		for _, r := range f.poll() {
			switch r.(type) {
			case EgressDenied:
				if gates > 0 {
					t.Fatal("a denial after the gate")
				}
				egress++
			case Gate:
				gates++
			}
		}
	}
	if egress != want || gates != 1 {
		t.Fatalf("%d denials of %d, %d gates", egress, want, gates)
	}
}

// TestMalformedAdmissionCountedOnce: an admission.json that does not parse
// is counted malformed once, not on every Poll; rewritten, it is read.
func TestMalformedAdmissionCountedOnce(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.CreateOperation(opID, "k8s.io", "c1"); err != nil {
		t.Fatal(err)
	}
	dir, _ := f.st.OperationDir(opID)
	if err := os.WriteFile(filepath.Join(dir, record.AdmissionFile), []byte(`{"operation_id": `), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		f.poll()
	}
	if f.r.Malformed != 1 || f.r.admReads != 1 {
		t.Fatalf("after 10 polls: malformed %d, admission read %d times", f.r.Malformed, f.r.admReads)
	}
	f.writeJSON(record.AdmissionFile, spec.Admission{OperationID: opID, Namespace: "k8s.io", ContainerID: "c1", Subject: &spec.Subject{InitPID: 1}})
	if got := kinds(f.poll()); got["admission"] != 1 || f.r.Malformed != 1 {
		t.Fatalf("rewritten: %v, malformed %d", got, f.r.Malformed)
	}
}

// TestUnboundNotReread: an operation not bound (yet, or ever) has its
// admission.json read again only once it changes, and never once its
// manifest was read.
func TestUnboundNotReread(t *testing.T) {
	f := newFixture(t)
	ids := mkOps(t, f, 50, false)
	f.poll()
	reads := f.r.admReads
	for range 5 {
		f.poll()
	}
	if f.r.admReads != reads {
		t.Fatalf("unchanged unbound admissions read %d times, then %d", reads, f.r.admReads)
	}
	// One bound now: read again, admitted once.
	adm := spec.Admission{OperationID: ids[0], Namespace: "k8s.io", ContainerID: "c0", Subject: &spec.Subject{InitPID: 1}}
	if err := f.st.WriteJSON(ids[0], record.AdmissionFile, adm); err != nil {
		t.Fatal(err)
	}
	if got := kinds(f.poll()); got["admission"] != 1 || f.r.admReads != reads+1 {
		t.Fatalf("bound: %v, %d reads", got, f.r.admReads-reads)
	}
	// One ended unbound (rolled back): its manifest is read, then its
	// admission never again, however it changes.
	if err := f.st.WriteJSON(ids[1], record.ManifestFile, spec.Manifest{OperationID: ids[1], Gate: spec.GateResult{Verdict: spec.VerdictPass}}); err != nil {
		t.Fatal(err)
	}
	if got := kinds(f.poll()); got["gate"] != 1 || got["admission"] != 0 {
		t.Fatalf("ended: %v", got)
	}
	reads = f.r.admReads
	adm.OperationID, adm.Subject = ids[1], nil
	if err := f.st.WriteJSON(ids[1], record.AdmissionFile, adm); err != nil {
		t.Fatal(err)
	}
	if f.poll(); f.r.admReads != reads {
		t.Fatalf("ended: admission read again")
	}
}
