package retention

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// addProduct creates a deleted operation record whose manifest (valid,
// as the runtime writes it) lists one staged structured result, and
// returns its id and the staged copy's path.
func (f *fixture) addProduct(container string, age time.Duration) (string, string) {
	f.t.Helper()
	id := f.add(opSpec{container: container, age: age, deleted: true})
	dir, _ := f.st.OperationDir(id)
	body := []byte(`{"ok":true}` + "\n")
	staged := filepath.Join(dir, record.StagedDir, "out", "result.json")
	if err := os.MkdirAll(filepath.Dir(staged), 0o700); err != nil {
		f.t.Fatal(err)
	}
	f.write(staged, string(body))
	sum := sha256.Sum256(body)
	m := spec.Manifest{Schema: spec.SchemaManifest, OperationID: id, Gate: spec.GateResult{Verdict: spec.VerdictPass},
		Products: []spec.ProductRecord{{Class: spec.ClassStructuredResult, Slot: "out/result.json", Verdict: spec.VerdictPass,
			Bytes: int64(len(body)), SHA256: hex.EncodeToString(sum[:]), Staged: "staged/out/result.json"}}}
	if err := f.st.WriteJSON(id, record.ManifestFile, m); err != nil {
		f.t.Fatal(err)
	}
	at := f.now.Add(-age)
	if err := os.Chtimes(filepath.Join(dir, record.ManifestFile), at, at); err != nil {
		f.t.Fatal(err)
	}
	return id, staged
}

// TestRunKeepsATamperedOperation: an operation past max_age whose staged
// product no longer matches its manifest is re-hashed before removal,
// kept, and flagged (events and a product_mismatch finding), which keeps
// it on the next run without a second finding; one that matches goes. A
// dry run re-hashes too but raises nothing.
func TestRunKeepsATamperedOperation(t *testing.T) {
	f := newFixture(t)
	old := 100 * 24 * time.Hour
	intact, _ := f.addProduct("intact", old)
	tampered, staged := f.addProduct("tampered", old)
	f.write(staged, `{"ok":false}`+"\n")
	p := Policy{MaxAge: 24 * time.Hour}

	dry, err := Run(context.Background(), f.st, p, now, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Removed) != 1 || dry.Removed[0].ID != intact || len(dry.Mismatched) != 1 || dry.Mismatched[0].Raised != 0 {
		t.Fatalf("dry run: removed %+v, mismatched %+v; want %s removed, %s mismatched and not raised", dry.Removed, dry.Mismatched, intact, tampered)
	}
	if openFindings(f.dir(tampered)) {
		t.Fatal("a dry run raised the finding")
	}

	var notified []string
	rep, err := Run(context.Background(), f.st, p, now, Options{Notify: func(opID string, f spec.Finding) {
		notified = append(notified, opID+" "+f.Signature)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(notified, []string{tampered + " product_mismatch"}) {
		t.Errorf("notified %q, want the raised finding", notified)
	}
	if got := f.ids(); !slices.Equal(got, []string{tampered}) {
		t.Fatalf("left %v, want only the tampered %s", got, tampered)
	}
	if len(rep.Mismatched) != 1 || rep.Mismatched[0].ID != tampered || rep.Mismatched[0].Raised != 1 ||
		!slices.Equal(rep.Mismatched[0].Slots, []string{"out/result.json"}) {
		t.Fatalf("mismatched %+v, want %s with one finding raised on out/result.json", rep.Mismatched, tampered)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Keep != KeepMismatch {
		t.Fatalf("skipped %+v, want the tampered one kept for %s", rep.Skipped, KeepMismatch)
	}
	a, _, err := events.ReadAttention(f.st, tampered)
	if err != nil || len(a.Open()) != 1 || a.Open()[0].Signature != "product_mismatch" {
		t.Fatalf("attention %+v (%v), want one open product_mismatch finding", a, err)
	}
	evs, err := os.ReadFile(filepath.Join(f.dir(tampered), record.EventsFile))
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %v", err)
	}

	again, err := Run(context.Background(), f.st, p, now, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Mismatched) != 0 || len(again.Kept) != 1 || again.Kept[0].Keep != KeepAttention {
		t.Fatalf("second run: mismatched %+v, kept %+v; want it kept for its open finding", again.Mismatched, again.Kept)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir(tampered), record.EventsFile)); len(b) != len(evs) {
		t.Fatal("the second run appended events")
	}
}

// TestRunKeepsAStagedSymlink: staged/ swapped for a symlink to / is a
// mismatch (the re-hash never follows it), not a tree to walk: kept.
func TestRunKeepsAStagedSymlink(t *testing.T) {
	f := newFixture(t)
	id, _ := f.addProduct("swapped", 100*24*time.Hour)
	staged := filepath.Join(f.dir(id), record.StagedDir)
	if err := os.RemoveAll(staged); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", staged); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), f.st, Policy{MaxAge: time.Hour}, now, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ids(); !slices.Equal(got, []string{id}) || len(rep.Mismatched) != 1 || rep.Mismatched[0].Raised != 1 {
		t.Fatalf("left %v, mismatched %+v: want %s kept and flagged", got, rep.Mismatched, id)
	}
}

func (f *fixture) dir(id string) string {
	f.t.Helper()
	d, err := f.st.OperationDir(id)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}
