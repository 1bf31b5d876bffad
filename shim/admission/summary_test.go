package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/gensee/gensee/spec"
)

func TestDecideSummaryAndRecord(t *testing.T) {
	fx := newFixture(t)
	env := fx.env(t, nil)
	d := Decide(fx.input(factsStrict, env))
	sum := sha256.Sum256(env)
	want := InferenceSummary{Analyzer: "ref-analyzer", Model: "ref-model-1", Class: "build", ConfidenceBP: 9300, MarginBP: 8900,
		ObservationDigest: fx.obsDig, EnvelopeSHA256: hex.EncodeToString(sum[:]),
		IssuedAt: fx.inference(nil).IssuedAt, ExpiresAt: fx.inference(nil).ExpiresAt}
	if d.Inference == nil || *d.Inference != want {
		t.Fatalf("summary = %+v\nwant %+v", d.Inference, want)
	}
	if d.Selector != "strict" || d.CatalogVersion != 3 || d.ObservationDigest != fx.obsDig {
		t.Errorf("decision = %+v", d)
	}

	// A verified but refused inference is still summarized (the manifest says what was seen).
	d = Decide(fx.input(factsBuilds, fx.env(t, func(i *spec.Inference) { i.Candidates = []spec.Candidate{{Class: "build", ConfidenceBP: 7000}} })))
	if !d.SafeDefault || d.Inference == nil || d.Inference.ConfidenceBP != 7000 {
		t.Errorf("fallback decision lost the summary: %+v", d)
	}
	// An unverified inference never is.
	d = Decide(fx.input(factsBuilds, signed(t, spec.PayloadTypeInference, fx.inference(nil), genKey(t))))
	if d.Inference != nil {
		t.Errorf("unverified inference summarized: %+v", d.Inference)
	}
}

// TestLowConfidenceMessage pins the operator-facing sentence.
func TestLowConfidenceMessage(t *testing.T) {
	fx := newFixture(t)
	d := Decide(fx.input(factsStrict, fx.env(t, func(i *spec.Inference) {
		i.Candidates = []spec.Candidate{{Class: "build", ConfidenceBP: 7000}}
	})))
	want := `low_confidence: top class "build" at 7000 bp is below analyzer ref-analyzer's threshold 8000 bp; re-run the analyzer or route this workload with a safe_default`
	if d.Message != want {
		t.Fatalf("message:\n got %s\nwant %s", d.Message, want)
	}
	// The refusal names the selector it matched (refusals.jsonl keeps it).
	if rf := d.Refusal(); rf == nil || rf.Selector != "strict" || rf.Record(d.Inference.IssuedAt).Selector != "strict" {
		t.Errorf("refusal %+v: want selector strict", rf)
	}
}

// TestSafeDefaultMissingContract: a safe_default that names no contract
// refuses (unrouted) instead of admitting with nothing.
func TestSafeDefaultMissingContract(t *testing.T) {
	fx := newFixture(t)
	cat := clone(fx.cat)
	for i := range cat.Selectors {
		if cat.Selectors[i].ID == "ci-builds" {
			cat.Selectors[i].SafeDefault = "gone"
		}
	}
	in := fx.input(factsBuilds, nil)
	in.Catalog = cat
	d := Decide(in)
	if d.Admitted || d.Reason != ReasonUnrouted || d.Contract != nil {
		t.Fatalf("decision = %+v", d)
	}
}

// TestContractIsCopied: the decision's contract is the catalog's, by value.
func TestContractIsCopied(t *testing.T) {
	fx := newFixture(t)
	d := Decide(fx.input(factsStrict, fx.env(t, nil)))
	d.Contract.Workspace = "/changed"
	if fx.cat.Contracts["offline"].Workspace != "/workspace" {
		t.Fatal("decision aliases the catalog's contract")
	}
}
