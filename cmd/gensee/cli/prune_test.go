package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	f := newStateFixture(t, "[retention]\nmax_age = \"240h\"\nmax_count = 0\nmax_bytes = 0\n")
	day := 24 * time.Hour
	old := f.add(t, recSpec{ns: "default", container: "old", contract: "c", verdict: "pass", age: 30 * day, deleted: true})
	fresh := f.add(t, recSpec{ns: "default", container: "fresh", contract: "c", verdict: "pass", age: day, deleted: true})
	running := f.add(t, recSpec{ns: "default", container: "running", contract: "c", age: -1})
	exited := f.add(t, recSpec{ns: "default", container: "exited", contract: "c", verdict: "pass", age: 30 * day})
	flagged := f.add(t, recSpec{ns: "default", container: "flagged", contract: "c", verdict: "fail", age: 30 * day, deleted: true, attention: true})
	refusals := refusalJSON(testNow.Add(-30*day), "default", "gone", "no_inference") + refusalJSON(testNow.Add(-time.Hour), "default", "kept", "spec_refused")
	writeFile(t, f.state, "refusals.jsonl", refusals)

	r := f.run(t, "prune", "--dry-run")
	r.want(t, ExitOK, []string{"would remove", old, "default/old", "max_age", "would remove 1 operation record",
		"1 attention", "1 not deleted", "1 running", "refusals.jsonl: would remove 1 line, 1 kept", "max_age 240h0m0s"}, nil)
	if !f.exists(old) {
		t.Fatal("--dry-run removed a record")
	}

	r = f.run(t, "prune", "--json")
	var rep PruneReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if rep.DryRun || len(rep.Removed) != 1 || rep.Removed[0].OperationID != old || rep.Removed[0].Reason != "max_age" ||
		rep.Refusals.DroppedLines != 1 || rep.Refusals.KeptLines != 1 || rep.Kept["attention"] != 1 {
		t.Fatalf("report: %+v", rep)
	}
	for id, want := range map[string]bool{old: false, fresh: true, running: true, exited: true, flagged: true} {
		if f.exists(id) != want {
			t.Errorf("%s exists = %v, want %v", id, !want, want)
		}
	}
	if _, err := f.st.Lookup("default", "old"); err == nil {
		t.Error("the removed operation is still indexed")
	}
	b, _ := os.ReadFile(f.st.RefusalsPath())
	if strings.Contains(string(b), `"gone"`) || !strings.Contains(string(b), `"kept"`) {
		t.Errorf("refusals.jsonl after prune:\n%s", b)
	}
	f.run(t, "manifest", "show", "old").want(t, ExitUsage, nil, []string{"no operation recorded for container old"})

	// Nothing left to go: a second prune removes nothing.
	f.run(t, "prune").want(t, ExitOK, []string{"removed 0 operation records"}, nil)
}

func TestPruneCountLimitKeepsNewest(t *testing.T) {
	f := newStateFixture(t, "[retention]\nmax_age = \"0s\"\nmax_count = 2\n")
	var ids []string
	for i, c := range []string{"a", "b", "c", "d"} {
		ids = append(ids, f.add(t, recSpec{ns: "default", container: c, contract: "x", verdict: "pass", age: time.Duration(10-i) * time.Hour, deleted: true}))
	}
	f.run(t, "prune").want(t, ExitOK, []string{"removed 2 operation records", "max_count"}, nil)
	for i, id := range ids {
		if f.exists(id) != (i >= 2) {
			t.Errorf("record %d exists = %v", i, f.exists(id))
		}
	}
}

func refusalJSON(at time.Time, ns, container, reason string) string {
	b, _ := json.Marshal(map[string]any{"at": at, "namespace": ns, "container_id": container, "reason": reason, "message": "refused " + container})
	return string(b) + "\n"
}
