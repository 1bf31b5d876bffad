package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

const (
	fxRunning  = "11111111111111111111111111111111"
	fxUnstaged = "22222222222222222222222222222222"
	fxInvalid  = "33333333333333333333333333333333"
)

// addNeighbours puts beside the fixture's operation one still running (no
// manifest) and one whose manifest lists no staged product: --all counts
// them and checks neither.
func (fx *opFixture) addNeighbours(t *testing.T) {
	t.Helper()
	st := record.Store{Dir: fx.state}
	if _, err := st.CreateOperation(fxRunning, fxNamespace, "running"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOperation(fxUnstaged, fxNamespace, "nothing"); err != nil {
		t.Fatal(err)
	}
	m := spec.Manifest{Schema: spec.SchemaManifest, OperationID: fxUnstaged, Gate: spec.GateResult{Verdict: spec.VerdictFail},
		Products: []spec.ProductRecord{{Class: spec.ClassStructuredResult, Slot: "out/r.json", Verdict: spec.VerdictFail}}}
	if err := st.WriteJSON(fxUnstaged, record.ManifestFile, m); err != nil {
		t.Fatal(err)
	}
}

func TestManifestVerifyAllMatches(t *testing.T) {
	fx := newOpFixture(t)
	fx.addNeighbours(t)
	fx.run(t, "manifest", "verify", "--all").want(t, ExitOK, []string{
		"operation " + fxOperation + " (builds/job-1): verified: 6 files of 4 staged product(s)\n",
		"verified 1 operation: 1 match, 0 do not match, 0 invalid manifest(s), 0 could not be read; " +
			"not checked: 1 without staged products, 1 without a manifest (running)\n"}, nil)
}

// TestManifestVerifyAllMismatch: --all flags a tampered operation as the
// single form does (its problem lines, exit 1, the events and attention),
// and once only: a second run (a timer's) raises nothing more.
func TestManifestVerifyAllMismatch(t *testing.T) {
	fx := newOpFixture(t)
	fx.addNeighbours(t)
	flipByte(t, fx.staged("out/result.json"))
	all := func() result { return fx.run(t, "manifest", "verify", "--all") }
	all().want(t, ExitRefused, []string{
		"operation " + fxOperation + " (builds/job-1): 1 problem(s): the staged products do not match the manifest\n" +
			fx.dir + "/staged/out/result.json: sha256: expected " + fx.sums["out/result.json"],
		"verified 1 operation: 0 match, 1 do not match"},
		[]string{"attention raised on operation " + fxOperation + ": 1 finding product_mismatch", "1 operation whose staged products do not match"})
	n := len(readEvents(t, fx.dir))
	if n != 2 {
		t.Fatalf("%d events, want product_mismatch and control_defeat", n)
	}
	all().want(t, ExitRefused, nil, []string{"already has attention for these problems"})
	if got := len(readEvents(t, fx.dir)); got != n {
		t.Fatalf("second --all appended events: %d, want %d", got, n)
	}
	// The single form recognises the finding --all raised.
	fx.run(t, "manifest", "verify", "--operation", fxOperation).want(t, ExitRefused, nil, []string{"already has attention"})
}

func TestManifestVerifyAllInvalidManifest(t *testing.T) {
	fx := newOpFixture(t)
	st := record.Store{Dir: fx.state}
	dir, err := st.CreateOperation(fxInvalid, fxNamespace, "broken")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, record.ManifestFile, `{"schema": "nope"}`)
	fx.run(t, "manifest", "verify", "--all").want(t, ExitRefused,
		[]string{"operation " + fxInvalid + ": invalid manifest ", "verified 2 operations: 1 match, 0 do not match, 1 invalid manifest(s)"}, nil)
}

func TestManifestVerifyAllExcludesOne(t *testing.T) {
	fx := newOpFixture(t)
	for _, args := range [][]string{{"--operation", fxOperation}, {fxContainer}, {"--container", fxContainer}, {"-n", fxNamespace}} {
		fx.run(t, append([]string{"manifest", "verify", "--all"}, args...)...).want(t, ExitUsage, nil, []string{"--all checks every operation"})
	}
}

// TestPruneKeepsTampered: prune re-hashes an operation's staged products
// before removing it; a mismatch keeps it, names it with its finding and
// raises that finding (a dry run raises nothing).
func TestPruneKeepsTampered(t *testing.T) {
	fx := newOpFixture(t)
	writeFile(t, fx.dir, record.CleanedMarker, "")
	at := testNow.Add(-1000 * time.Hour)
	if err := os.Chtimes(filepath.Join(fx.dir, record.ManifestFile), at, at); err != nil {
		t.Fatal(err)
	}
	flipByte(t, fx.staged("out/blobs/b.txt"))
	kept := "kept " + fxOperation + " (builds/job-1): 2 problems in its staged products (out/blobs): they do not match its manifest; "
	fx.run(t, "prune", "--dry-run").want(t, ExitOK, []string{kept + "product_mismatch not raised (dry run", "would remove 0 operation records",
		"1 product mismatch"}, nil)
	if exists(filepath.Join(fx.dir, record.AttentionFile)) {
		t.Fatal("a dry run raised attention")
	}
	r := fx.run(t, "prune", "--json")
	r.want(t, ExitOK, nil, nil)
	var rep PruneReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 || len(rep.Mismatched) != 1 || rep.Mismatched[0].OperationID != fxOperation ||
		rep.Mismatched[0].FindingsRaised != 1 || rep.Kept["product_mismatch"] != 1 {
		t.Fatalf("prune --json %+v, want the operation kept for its mismatch with a finding raised", rep)
	}
	fx.run(t, "attention", "list").want(t, ExitOK, []string{fxOperation, "product_mismatch"}, nil)
	if r := fx.run(t, "prune"); !strings.Contains(r.stdout, "1 attention") || strings.Contains(r.stdout, "kept "+fxOperation) {
		t.Fatalf("second prune: want it kept for its open finding, not re-hashed:\n%s", r.stdout)
	}
}
