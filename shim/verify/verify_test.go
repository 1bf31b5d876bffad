package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

const opID = "00112233445566778899aabbccddeeff"

var now = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)

func hexOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// stagedOp is an operation record with one staged structured result, as
// the gate leaves it, and the product records its manifest holds.
func stagedOp(t *testing.T) (record.Store, string, []spec.ProductRecord) {
	t.Helper()
	st := record.Store{Dir: t.TempDir()}
	dir, err := st.CreateOperation(opID, "default", "job")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"ok":true}` + "\n")
	p := filepath.Join(dir, record.StagedDir, "out", "result.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, body, 0o600); err != nil {
		t.Fatal(err)
	}
	products := []spec.ProductRecord{
		{Class: spec.ClassStructuredResult, Slot: "out/result.json", Verdict: spec.VerdictPass, Bytes: int64(len(body)),
			SHA256: hexOf(body), Staged: "staged/out/result.json"},
		{Class: spec.ClassStructuredResult, Slot: "out/bad.json", Verdict: spec.VerdictFail},
	}
	return st, dir, products
}

func TestStagedMatches(t *testing.T) {
	_, dir, products := stagedOp(t)
	r, err := Staged(dir, products)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Files != 1 || r.Products != 1 || len(r.Slots) != 0 {
		t.Fatalf("result %+v, want one file of one product, no problems", r)
	}
}

// TestStagedGroupsBySlot: problems group by product slot (a stray staged
// path is its own), in the order found; the evidence line names digests
// as sha256: with the path relative to the operation, the person's line
// the path below the operation directory.
func TestStagedGroupsBySlot(t *testing.T) {
	_, dir, products := stagedOp(t)
	os.WriteFile(filepath.Join(dir, "staged/out/result.json"), []byte("{}\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "staged/out/extra.txt"), []byte("x"), 0o600)
	r, err := Staged(dir, products)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"out/result.json", "out/extra.txt"}; !slices.Equal(r.Slots, want) {
		t.Fatalf("slots %q, want %q", r.Slots, want)
	}
	want := "staged/out/result.json: sha256: expected sha256:" + products[0].SHA256 + ", actual sha256:" + hexOf([]byte("{}\n"))
	if got := r.Lines["out/result.json"]; !slices.Contains(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	if got := PathLine(dir, r.Mismatches[0]); !strings.HasPrefix(got, dir+"/staged/out/result.json: sha256: expected "+products[0].SHA256) {
		t.Errorf("path line %q", got)
	}
	if d := Detail(r.Lines["out/result.json"]); !strings.HasPrefix(d, "re-hash of the staged products found 2 problem(s): ") {
		t.Errorf("detail %q", d)
	}
}

func TestListsStaged(t *testing.T) {
	for _, c := range []struct {
		products []spec.ProductRecord
		want     bool
	}{
		{nil, false},
		{[]spec.ProductRecord{{Verdict: spec.VerdictFail}}, false},
		{[]spec.ProductRecord{{Verdict: spec.VerdictFail}, {Verdict: spec.VerdictPass}}, true},
		{[]spec.ProductRecord{{Verdict: spec.VerdictFail, Staged: "staged/x"}}, true},
	} {
		if got := ListsStaged(c.products); got != c.want {
			t.Errorf("%+v: %v, want %v", c.products, got, c.want)
		}
	}
}

// TestRaiseOnce: a mismatch becomes a product_mismatch event (and the
// watchdog's control_defeat) per slot and one finding each; the same
// damage found again raises nothing while the finding is open, and is
// raised again once a person cleared it.
func TestRaiseOnce(t *testing.T) {
	st, dir, products := stagedOp(t)
	os.WriteFile(filepath.Join(dir, "staged/out/result.json"), []byte("{}\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "staged/out/extra.txt"), []byte("x"), 0o600)
	r, err := Staged(dir, products)
	if err != nil {
		t.Fatal(err)
	}
	if got := Raise(st, opID, r, now); got.Findings != 2 || got.Already != 0 || len(got.Errs) != 0 {
		t.Fatalf("first raise %+v, want 2 findings", got)
	}
	want := []string{"product_mismatch out/result.json", "control_defeat out/result.json", "product_mismatch out/extra.txt", "control_defeat out/extra.txt"}
	if got := eventKinds(t, dir); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	a, _, err := events.ReadAttention(st, opID)
	if err != nil || len(a.Open()) != 2 || a.Open()[0].Signature != "product_mismatch" {
		t.Fatalf("attention %+v (%v), want 2 open product_mismatch findings", a, err)
	}
	if got := Raise(st, opID, r, now.Add(time.Hour)); got.Findings != 0 || got.Already != 2 {
		t.Fatalf("second raise %+v, want both already open", got)
	}
	if n := len(eventKinds(t, dir)); n != len(want) {
		t.Fatalf("second raise appended events: %d, want %d", n, len(want))
	}
	if _, err := events.ClearAttention(st, opID, spec.Clearing{By: "uid 0", At: now}); err != nil {
		t.Fatal(err)
	}
	if got := Raise(st, opID, r, now.Add(2*time.Hour)); got.Findings != 2 {
		t.Fatalf("raise after the clearing %+v, want 2 findings again", got)
	}
}

func TestRaiseNothing(t *testing.T) {
	st, dir, products := stagedOp(t)
	r, err := Staged(dir, products)
	if err != nil {
		t.Fatal(err)
	}
	if got := Raise(st, opID, r, now); got.Findings != 0 || got.Already != 0 || len(got.Errs) != 0 {
		t.Fatalf("raise of a match %+v", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, record.EventsFile)); err == nil {
		t.Fatal("a match wrote events")
	}
}

func eventKinds(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, record.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e spec.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("event %q: %v", l, err)
		}
		out = append(out, e.Kind+" "+e.Target)
	}
	return out
}
