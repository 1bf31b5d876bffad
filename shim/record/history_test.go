package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gensee/gensee/spec"
)

const obsDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func opID(i int) string { return fmt.Sprintf("%032x", i+1) }

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// run is a manifest of obsDigest admitted under ref-analyzer's class
// build that ended as verdict says (spec.HistoryVerdict).
func run(verdict spec.HistoryVerdict) *spec.Manifest {
	m := &spec.Manifest{Schema: spec.SchemaManifest, ObservationDigest: obsDigest,
		Inference: spec.InferenceSummary{Analyzer: "ref-analyzer", Class: "build", ConfidenceBP: 9000},
		Gate:      spec.GateResult{Verdict: spec.VerdictPass}}
	switch verdict {
	case spec.HistoryUnclean:
		m.Gate.Verdict = spec.VerdictFail
	case spec.HistoryUncertain:
		m.Gate.Verdict = spec.VerdictNotRun
	}
	return m
}

// index writes m as operation i's manifest.json and indexes it; it
// returns the manifest's sha256.
func index(t *testing.T, st Store, i int, m *spec.Manifest) string {
	t.Helper()
	id := opID(i)
	m.OperationID = id
	if _, err := st.OperationDir(id); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(st.Dir, "operations", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendHistory(id, m, b); err != nil {
		t.Fatal(err)
	}
	return sum(b)
}

func ids(refs []spec.HistoryRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.OperationID)
	}
	return out
}

func historyLines(t *testing.T, st Store) int {
	p, _ := st.historyPath(obsDigest)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(data, []byte{'\n'})
}

// TestHistoryOrder: the history of an observation names the analyzer's
// unclean runs first, newest first, then the others newest first; a
// safe_default run, another analyzer's run and another observation's run
// are not named.
func TestHistoryOrder(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	if refs, err := st.History(obsDigest, "ref-analyzer", spec.MaxHistoryRefs); err != nil || refs != nil {
		t.Fatalf("no history: %v, %v", refs, err)
	}
	s0 := index(t, st, 0, run(spec.HistoryClean))
	index(t, st, 1, run(spec.HistoryUnclean))
	index(t, st, 2, run(spec.HistoryUncertain))
	index(t, st, 3, run(spec.HistoryUnclean))
	safe := run(spec.HistoryUnclean)
	safe.Inference.SafeDefault = true
	index(t, st, 4, safe)
	other := run(spec.HistoryUnclean)
	other.Inference.Analyzer = "other-analyzer"
	index(t, st, 5, other)
	elsewhere := run(spec.HistoryUnclean)
	elsewhere.ObservationDigest = "sha256:" + strings.Repeat("f", 64)
	index(t, st, 6, elsewhere)
	index(t, st, 7, run(spec.HistoryClean))

	refs, err := st.History(obsDigest, "ref-analyzer", spec.MaxHistoryRefs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(refs), []string{opID(3), opID(1), opID(7), opID(2), opID(0)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if refs[4].ManifestSHA256 != s0 {
		t.Errorf("sha256 %s, want %s", refs[4].ManifestSHA256, s0)
	}
	if refs, _ := st.History(obsDigest, "ref-analyzer", 3); fmt.Sprint(ids(refs)) != fmt.Sprint([]string{opID(3), opID(1), opID(7)}) {
		t.Errorf("history of 3: %v", ids(refs))
	}
	if refs, _ := st.History(obsDigest, "other-analyzer", 16); fmt.Sprint(ids(refs)) != fmt.Sprint([]string{opID(5)}) {
		t.Errorf("other analyzer's history: %v", ids(refs))
	}
	if refs, _ := st.History("sha256:"+strings.Repeat("f", 64), "ref-analyzer", 16); fmt.Sprint(ids(refs)) != fmt.Sprint([]string{opID(6)}) {
		t.Errorf("other observation's history: %v", ids(refs))
	}
	p, _ := st.historyPath(obsDigest)
	for path, mode := range map[string]os.FileMode{p: 0o600, filepath.Dir(p): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, mode)
		}
	}
}

// TestHistoryKeepsUnclean: the file grows to historyTrimAt-1 lines, and
// the append that makes historyTrimAt trims it to HistoryKeep: the oldest
// clean or uncertain lines go; an unclean one stays however many runs
// follow it, and goes (oldest first) only when every line is unclean.
func TestHistoryKeepsUnclean(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	index(t, st, 0, run(spec.HistoryClean))
	index(t, st, 1, run(spec.HistoryUnclean))
	n, want := 2, 2 // appends so far; the lines the file holds
	for ; n < historyTrimAt*3; n++ {
		index(t, st, n, run([]spec.HistoryVerdict{spec.HistoryClean, spec.HistoryUncertain}[n%2]))
		if want++; want == historyTrimAt {
			want = HistoryKeep
		}
		if l := historyLines(t, st); l != want {
			t.Fatalf("after %d appends the history has %d lines, want %d", n+1, l, want)
		}
	}
	refs, err := st.History(obsDigest, "ref-analyzer", 1000)
	if err != nil || len(refs) != want || refs[0].OperationID != opID(1) || refs[1].OperationID != opID(n-1) || refs[want-1].OperationID != opID(n-want+1) {
		t.Fatalf("history %v (%v)", ids(refs), err)
	}
	if refs, _ := st.History(obsDigest, "ref-analyzer", spec.MaxHistoryRefs); refs[0].OperationID != opID(1) {
		t.Fatalf("the unclean run is not named first: %v", ids(refs))
	}
	// All unclean: the oldest unclean go, and a clean run is not kept.
	st = Store{Dir: t.TempDir()}
	for i := range historyTrimAt - 1 {
		index(t, st, i, run(spec.HistoryUnclean))
	}
	index(t, st, historyTrimAt-1, run(spec.HistoryClean))
	refs, _ = st.History(obsDigest, "ref-analyzer", 1000)
	if len(refs) != HistoryKeep || refs[0].OperationID != opID(historyTrimAt-2) || refs[HistoryKeep-1].OperationID != opID(historyTrimAt-1-HistoryKeep) {
		t.Fatalf("all unclean: %d refs, first %s, last %s", len(refs), refs[0].OperationID, refs[len(refs)-1].OperationID)
	}
	if slices.Contains(ids(refs), opID(historyTrimAt-1)) {
		t.Fatalf("a clean run displaced an unclean one: %v", ids(refs))
	}
}

// TestHistoryRemovedOperation: once an operation is removed (gensee
// prune, retention), its line is no longer named, and it is the first
// dropped, before a clean line: removing the record is what clears an
// unclean run.
func TestHistoryRemovedOperation(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	for i := range HistoryKeep {
		index(t, st, i, run(spec.HistoryUnclean))
	}
	clean := HistoryKeep
	index(t, st, clean, run(spec.HistoryClean))
	for i := range HistoryKeep {
		if err := st.RemoveOperation(opID(i)); err != nil {
			t.Fatal(err)
		}
	}
	if refs, _ := st.History(obsDigest, "ref-analyzer", 16); fmt.Sprint(ids(refs)) != fmt.Sprint([]string{opID(clean)}) {
		t.Fatalf("history after removal %v", ids(refs))
	}
	for i := clean + 1; i < historyTrimAt; i++ { // the last append trims
		index(t, st, i, run(spec.HistoryUnclean))
	}
	p, _ := st.historyPath(obsDigest)
	data, _ := os.ReadFile(p)
	for i := range HistoryKeep {
		if bytes.Contains(data, []byte(opID(i))) {
			t.Fatalf("the removed operation %s's line stayed:\n%s", opID(i), data)
		}
	}
	if !bytes.Contains(data, []byte(opID(clean))) || historyLines(t, st) != HistoryKeep {
		t.Fatalf("a live clean line went before the removed ones:\n%s", data)
	}
}

// TestHistoryBesideTheManifest: a line is indexed beside its manifest's
// write (engine.RecordStore), into the operation's directory that is
// already there. While that manifest is on its way, another run's trim of
// the full history keeps the line (an unclean one must not go first), a
// reader does not name it, and once it lands the reader does; a line whose
// operation was removed is still dropped first.
func TestHistoryBesideTheManifest(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	for i := range historyTrimAt - 2 {
		index(t, st, i, run(spec.HistoryClean))
	}
	if err := st.RemoveOperation(opID(3)); err != nil {
		t.Fatal(err)
	}
	// Run A (unclean): its line first, its manifest still to come.
	a := opID(historyTrimAt - 2)
	m := run(spec.HistoryUnclean)
	m.OperationID = a
	b, _ := json.Marshal(m)
	dir, _ := st.OperationDir(a)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendHistory(a, m, b); err != nil {
		t.Fatal(err)
	}
	// Run B (clean) ends meanwhile: line and manifest, trimming the file.
	index(t, st, historyTrimAt-1, run(spec.HistoryClean))
	p, _ := st.historyPath(obsDigest)
	data, _ := os.ReadFile(p)
	if !bytes.Contains(data, []byte(a)) || bytes.Contains(data, []byte(opID(3))) || historyLines(t, st) != HistoryKeep {
		t.Fatalf("the in-flight unclean line went, or the removed operation's stayed:\n%s", data)
	}
	if refs, _ := st.History(obsDigest, "ref-analyzer", spec.MaxHistoryRefs); slices.Contains(ids(refs), a) {
		t.Fatalf("named a run whose manifest is not there: %v", ids(refs))
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if refs, _ := st.History(obsDigest, "ref-analyzer", 1); len(refs) != 1 || refs[0].OperationID != a || refs[0].ManifestSHA256 != sum(b) {
		t.Fatalf("the unclean run once its manifest is written: %v", refs)
	}
}

// TestHistoryConcurrent: writers of the same digest lose no line (up to
// the bound) and tear none.
func TestHistoryConcurrent(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() { index(t, st, i, run(spec.HistoryClean)) })
	}
	wg.Wait()
	refs, err := st.History(obsDigest, "ref-analyzer", 1000)
	if err != nil || len(refs) != 40 {
		t.Fatalf("%d refs after 40 concurrent appends (%v)", len(refs), err)
	}
}

func TestHistorySkipsDamage(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	s0 := index(t, st, 0, run(spec.HistoryClean))
	p, _ := st.historyPath(obsDigest)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// junk, a duplicate, a bad id, a bad verdict, an old line without
	// analyzer, class and verdict, then a torn line
	f.WriteString("junk\n" + `{"operation_id":"` + opID(0) + `","manifest_sha256":"` + s0 + `","analyzer":"ref-analyzer","class":"build","verdict":"clean"}` + "\n" +
		`{"operation_id":"../x","manifest_sha256":"` + sum(nil) + `","analyzer":"ref-analyzer","class":"build","verdict":"clean"}` + "\n" +
		`{"operation_id":"` + opID(0) + `","manifest_sha256":"` + s0 + `","analyzer":"ref-analyzer","class":"build","verdict":"fine"}` + "\n" +
		`{"operation_id":"` + opID(0) + `","manifest_sha256":"` + s0 + `"}` + "\n" + `{"operation_id":"` + opID(9))
	f.Close()
	if refs, err := st.History(obsDigest, "ref-analyzer", 16); err != nil || len(refs) != 1 || refs[0].OperationID != opID(0) {
		t.Fatalf("history %v (%v)", refs, err)
	}
	// The next append rewrites the file without the damage.
	index(t, st, 1, run(spec.HistoryClean))
	data, _ := os.ReadFile(p)
	if n := bytes.Count(data, []byte{'\n'}); n != 3 || bytes.Contains(data, []byte("junk")) || !bytes.HasSuffix(data, []byte("\"}\n")) {
		t.Fatalf("rewritten history:\n%s", data)
	}
	if refs, _ := st.History(obsDigest, "ref-analyzer", 16); len(refs) != 2 || refs[0].OperationID != opID(1) {
		t.Fatalf("history %v", refs)
	}
}

// TestHistoryLineBound: a line with 128-character analyzer and class ids
// (the longest ids a catalog holds) is indexed, a longer one is not, and
// the lines a file holds before its trim always fit the read bound.
func TestHistoryLineBound(t *testing.T) {
	if (historyTrimAt-1)*maxHistoryLine > maxHistoryBytes {
		t.Fatalf("%d lines of %d bytes exceed the %d-byte read bound", historyTrimAt-1, maxHistoryLine, maxHistoryBytes)
	}
	st := Store{Dir: t.TempDir()}
	long := strings.Repeat("a", 128)
	for i := range historyTrimAt - 1 {
		m := run(spec.HistoryUnclean)
		m.Inference.Analyzer, m.Inference.Class = long, long
		index(t, st, i, m)
	}
	if refs, err := st.History(obsDigest, long, spec.MaxHistoryRefs); err != nil || len(refs) != spec.MaxHistoryRefs {
		t.Fatalf("%d refs (%v)", len(refs), err)
	}
	m := run(spec.HistoryClean)
	m.Inference.Analyzer = strings.Repeat("b", maxHistoryLine)
	m.OperationID = opID(historyTrimAt)
	if err := st.AppendHistory(m.OperationID, m, nil); err == nil {
		t.Fatal("an over-long line was indexed")
	}
}

func TestHistoryRefusesBadInput(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	for _, d := range []string{"", "sha256:../../etc/passwd", "sha256:" + strings.Repeat("A", 64), strings.Repeat("a", 64)} {
		m := run(spec.HistoryClean)
		m.ObservationDigest = d
		if err := st.AppendHistory(opID(0), m, nil); err == nil {
			t.Errorf("AppendHistory(%q) indexed", d)
		}
		if _, err := st.History(d, "ref-analyzer", 1); err == nil {
			t.Errorf("History(%q) read", d)
		}
	}
	if err := st.AppendHistory("not-an-id", run(spec.HistoryClean), nil); err == nil {
		t.Error("a malformed operation id was indexed")
	}
	// A symlink in the history file's place is never followed.
	p, _ := st.historyPath(obsDigest)
	os.MkdirAll(filepath.Dir(p), 0o700)
	target := filepath.Join(st.Dir, "target")
	os.WriteFile(target, nil, 0o600)
	os.Symlink(target, p)
	if err := st.AppendHistory(opID(0), run(spec.HistoryClean), nil); err == nil {
		t.Error("appended through a symlink")
	}
	if _, err := st.History(obsDigest, "ref-analyzer", 1); err == nil {
		t.Error("read through a symlink")
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("the symlink's target was written: %q", b)
	}
}

// TestWriteJSONIsEncodeJSON: what WriteJSON puts on disk is exactly
// EncodeJSON's bytes, the ones engine.RecordStore writes and indexes.
func TestWriteJSONIsEncodeJSON(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	id := opID(0)
	if _, err := st.CreateOperation(id, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	v := map[string]int{"a": 1}
	if err := st.WriteJSON(id, ManifestFile, v); err != nil {
		t.Fatal(err)
	}
	b, err := EncodeJSON(ManifestFile, v)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := st.OperationDir(id)
	if disk, _ := os.ReadFile(filepath.Join(dir, ManifestFile)); !bytes.Equal(disk, b) {
		t.Fatalf("wrote %q, returned %q", disk, b)
	}
}

// TestHistoryEveryUncleanClass: however many unclean runs of one class
// (or of another analyzer) follow, the newest unclean run of every class
// is named and kept.
func TestHistoryEveryUncleanClass(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	index(t, st, 0, run(spec.HistoryUnclean))                 // build
	for i := 1; i <= historyTrimAt+spec.MaxHistoryRefs; i++ { // one trim
		m := run(spec.HistoryUnclean)
		if m.Inference.Class = "lint"; i%2 == 0 {
			m.Inference.Analyzer = "other-analyzer"
		}
		index(t, st, i, m)
	}
	refs, err := st.History(obsDigest, "ref-analyzer", spec.MaxHistoryRefs)
	if err != nil || len(refs) != spec.MaxHistoryRefs || refs[1].OperationID != opID(0) {
		t.Fatalf("history %v (%v); want build's unclean run second", ids(refs), err)
	}
	if l := historyLines(t, st); l != HistoryKeep+spec.MaxHistoryRefs+1 {
		t.Fatalf("%d lines", l)
	}
}
