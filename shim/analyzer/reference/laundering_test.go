package reference

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// writeRun writes operation n's manifest (a clean run of digest under
// class, changed by mut) into the runtime's records and indexes it as the
// runtime does (record.Store.AppendHistory).
func (fx *fixture) writeRun(st record.Store, n int, digest, class string, mut func(*spec.Manifest)) {
	fx.t.Helper()
	id := opid(n)
	m := spec.Manifest{Schema: spec.SchemaManifest, OperationID: id, ObservationDigest: digest, CommandDigest: "sha256:" + strings.Repeat("c", 64),
		Inference:   spec.InferenceSummary{Analyzer: "ref-analyzer", Model: DefaultModel, Class: class, ConfidenceBP: 9000, Source: spec.InferenceFromAnalyzer},
		Enforcement: spec.Enforcement{Network: spec.NetworkEnforcement{Mechanism: "nftables", Status: spec.NetworkEnforced}},
		Observation: spec.Observed{DeniedAttempts: spec.DeniedAttempts{Complete: true}},
		Gate:        spec.GateResult{Verdict: spec.VerdictPass}}
	if mut != nil {
		mut(&m)
	}
	data := mustJSON(fx.t, m)
	dir := filepath.Join(fx.records, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fx.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, record.ManifestFile), data, 0o600); err != nil {
		fx.t.Fatal(err)
	}
	if err := st.AppendHistory(id, &m, data); err != nil {
		fx.t.Fatal(err)
	}
}

// TestHistoryLaundering: one unclean run of an observation under a class
// withholds the class however many runs follow (safe_default runs of the
// same observation, runs of another executable with the same command,
// clean runs of the same observation under the class, runs another
// analyzer admitted): the runtime's history names the unclean run first
// and keeps it. Removing its record (gensee prune, retention) clears it.
func TestHistoryLaundering(t *testing.T) {
	denied := func(m *spec.Manifest) {
		m.Observation.DeniedAttempts.Items = []spec.DeniedAttempt{{Target: "203.0.113.9:443", Proto: "tcp"}}
	}
	for name, fill := range map[string]func(fx *fixture, st record.Store, n int, req spec.AnalyzerRequest){
		"safe_default runs of the observation": func(fx *fixture, st record.Store, n int, req spec.AnalyzerRequest) {
			fx.writeRun(st, n, req.ObservationDigest, "", func(m *spec.Manifest) { m.Inference.SafeDefault = true })
		},
		"runs of another executable with the same command": func(fx *fixture, st record.Store, n int, req spec.AnalyzerRequest) {
			fx.writeRun(st, n, fx.request(exeMake, req.Command.Args...).ObservationDigest, "build", nil)
		},
		"clean runs of the observation under the class": func(fx *fixture, st record.Store, n int, req spec.AnalyzerRequest) {
			fx.writeRun(st, n, req.ObservationDigest, "build", func(m *spec.Manifest) { m.Inference.Source = spec.InferenceFromAnnotation })
		},
		"unclean runs another analyzer admitted": func(fx *fixture, st record.Store, n int, req spec.AnalyzerRequest) {
			fx.writeRun(st, n, req.ObservationDigest, "build", func(m *spec.Manifest) { denied(m); m.Inference.Analyzer = "other-analyzer" })
		},
	} {
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			a := fx.load()
			st := record.Store{Dir: fx.dir} // its operations are fx.records
			req := fx.request(exeGo, "go", "build", "./...")
			ask := func() spec.AnalyzerAnswer {
				t.Helper()
				refs, err := st.History(req.ObservationDigest, "ref-analyzer", spec.MaxHistoryRefs)
				if err != nil {
					t.Fatal(err)
				}
				r := req
				r.History = refs
				res, err := a.Infer(context.Background(), r, fx.now)
				if err != nil {
					t.Fatal(err)
				}
				return res.Answer
			}
			open(t, fx, ask()) // the class before any run
			fx.writeRun(st, 0, req.ObservationDigest, "build", denied)
			want := "class build withheld: earlier operation " + opid(0) + " (denied attempt to 203.0.113.9:443)"
			for i := 1; i <= record.HistoryKeep+spec.MaxHistoryRefs+1; i++ {
				fill(fx, st, i, req)
				if i%spec.MaxHistoryRefs != 1 && i < record.HistoryKeep {
					continue // ask at a few points: each ask reads the manifests anew only once
				}
				if ans := ask(); !strings.Contains(ans.NoClass, want) {
					t.Fatalf("after %d runs: %+v; want %q", i, ans, want)
				}
			}
			if err := st.RemoveOperation(opid(0)); err != nil {
				t.Fatal(err)
			}
			if name == "unclean runs another analyzer admitted" {
				return // they do not withhold this analyzer's class
			}
			if in := open(t, fx, ask()); in.Candidates[0].Class != "build" {
				t.Fatalf("after removing the unclean run: %v", in.Candidates)
			}
		})
	}
}
