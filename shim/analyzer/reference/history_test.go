package reference

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

// TestHistory: clean earlier runs of the same observation under a class
// raise it (per_run_bp each, at most max_bp, at most 10000); an unclean
// one withholds it; others neither count nor withhold.
func TestHistory(t *testing.T) {
	make8000 := base(7500) // make: build 7500, below 8000
	for _, tt := range []struct {
		name    string
		rules   func(*spec.AnalyzerRules)
		runs    func(fx *fixture, digest string) []spec.HistoryRef
		want    int    // build's confidence; 0: no class
		noClass string // the reason, when want is 0
	}{
		{"none", make8000, func(*fixture, string) []spec.HistoryRef { return nil }, 0, "below analyzer's min_confidence_bp"},
		{"three clean runs raise", make8000, func(fx *fixture, d string) []spec.HistoryRef {
			return []spec.HistoryRef{fx.manifest(opid(1), d, "build", nil), fx.manifest(opid(2), d, "build", nil), fx.manifest(opid(3), d, "build", nil)}
		}, 8100, ""},
		{"bounded by max_bp", make8000, func(fx *fixture, d string) []spec.HistoryRef {
			var refs []spec.HistoryRef
			for i := range 8 {
				refs = append(refs, fx.manifest(opid(i), d, "build", nil))
			}
			return refs
		}, 8500, ""},
		{"capped at 10000", func(r *spec.AnalyzerRules) { r.Rules[2].ConfidenceBP = 9900 }, func(fx *fixture, d string) []spec.HistoryRef {
			return []spec.HistoryRef{fx.manifest(opid(1), d, "build", nil)}
		}, 10000, ""},
		{"no policy", func(r *spec.AnalyzerRules) { make8000(r); r.History = nil }, func(fx *fixture, d string) []spec.HistoryRef {
			return []spec.HistoryRef{fx.manifest(opid(1), d, "build", nil), fx.manifest(opid(2), d, "build", nil), fx.manifest(opid(3), d, "build", nil)}
		}, 0, "below"},
		{"same operation twice counts once", make8000, func(fx *fixture, d string) []spec.HistoryRef {
			r := fx.manifest(opid(1), d, "build", nil)
			return []spec.HistoryRef{r, r, r, fx.manifest(opid(2), d, "build", nil), fx.manifest(opid(3), d, "build", nil)}
		}, 8100, ""},
		{"other observation, safe_default, other class, uncertain do not count", base(7900), func(fx *fixture, d string) []spec.HistoryRef {
			other := fx.request(exeMake, "make", "other").ObservationDigest
			return []spec.HistoryRef{
				fx.manifest(opid(1), other, "build", nil),
				fx.manifest(opid(2), d, "", func(m *spec.Manifest) { m.Inference.SafeDefault = true }),
				fx.manifest(opid(3), d, "fetch", nil),
				fx.manifest(opid(4), d, "build", func(m *spec.Manifest) { m.Gate.Verdict = spec.VerdictNotRun }),
				fx.manifest(opid(5), d, "build", func(m *spec.Manifest) { m.Enforcement.Network.Status = spec.NetworkUnwatched }),
				fx.manifest(opid(6), d, "build", func(m *spec.Manifest) { m.Observation.Counters.Error = "netlink" }),
				fx.manifest(opid(7), d, "build", nil),
			}
		}, 8100, ""},
		{"another analyzer's runs neither count nor withhold", base(7900), func(fx *fixture, d string) []spec.HistoryRef {
			o := func(m *spec.Manifest) { m.Inference.Analyzer = "other-analyzer" }
			bad := func(m *spec.Manifest) { o(m); m.Gate.Verdict = spec.VerdictFail }
			return []spec.HistoryRef{fx.manifest(opid(1), d, "build", o), fx.manifest(opid(2), d, "build", bad), fx.manifest(opid(3), d, "build", nil)}
		}, 8100, ""},
		{"sha mismatch and bad refs ignored", base(7900), func(fx *fixture, d string) []spec.HistoryRef {
			bad := fx.manifest(opid(1), d, "build", nil)
			bad.ManifestSHA256 = strings.Repeat("0", 64)
			unclean := fx.manifest(opid(2), d, "build", func(m *spec.Manifest) { m.Gate.Verdict = spec.VerdictFail })
			unclean.ManifestSHA256 = strings.Repeat("1", 64)
			return []spec.HistoryRef{bad, unclean, {OperationID: "../../etc", ManifestSHA256: bad.ManifestSHA256},
				{OperationID: opid(9), ManifestSHA256: bad.ManifestSHA256}, fx.manifest(opid(3), d, "build", nil)}
		}, 8100, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.writeRules(tt.rules, fx.rulesK)
			a := fx.load()
			req := fx.request(exeMake, "make")
			req.History = tt.runs(fx, req.ObservationDigest)
			res, err := a.Infer(context.Background(), req, fx.now)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == 0 {
				if !strings.Contains(res.Answer.NoClass, tt.noClass) {
					t.Fatalf("answer %+v; want no class %q", res.Answer, tt.noClass)
				}
				return
			}
			if in := open(t, fx, res.Answer); in.Candidates[0] != (spec.Candidate{Class: "build", ConfidenceBP: tt.want}) {
				t.Fatalf("candidates %v, want build at %d", in.Candidates, tt.want)
			}
		})
	}
}

// TestHistoryWithholds: one unclean run of this observation under a class
// (failed gate, finding, denied attempt or packet, escape, drift, defeat)
// withholds that class, whatever the clean runs say.
func TestHistoryWithholds(t *testing.T) {
	for name, mut := range map[string]func(*spec.Manifest){
		"gate failed": func(m *spec.Manifest) { m.Gate.Verdict = spec.VerdictFail },
		"finding": func(m *spec.Manifest) {
			m.Findings = []spec.Finding{{Signature: "deny_then_reach", Detail: "x", Evidence: []spec.Event{}}}
		},
		"denied attempt": func(m *spec.Manifest) {
			m.Observation.DeniedAttempts.Items = []spec.DeniedAttempt{{Target: "10.0.0.1:443", Proto: "tcp"}}
		},
		"denied packets": func(m *spec.Manifest) { m.Observation.Counters.DeniedPackets = 3 },
		"escape":         func(m *spec.Manifest) { m.Enforcement.Network.Status = spec.NetworkEscapeDetected },
		"drift":          func(m *spec.Manifest) { m.Enforcement.Network.Status = spec.NetworkDriftDetected },
		"defeat":         func(m *spec.Manifest) { m.Enforcement.Network.Status = spec.NetworkDefeatDetected },
	} {
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			a := fx.load()
			req := fx.request(exeMake, "make", "go", "mod", "download") // fetch-mod does not match: argv is 5 long
			req.Image = "registry.example/ci:1"                         // build at 8500
			d := req.ObservationDigest
			req.History = []spec.HistoryRef{fx.manifest(opid(1), d, "build", nil), fx.manifest(opid(2), d, "build", mut), fx.manifest(opid(3), d, "build", nil)}
			res, err := a.Infer(context.Background(), req, fx.now)
			want := "class build withheld: earlier operation " + opid(2)
			if err != nil || !strings.Contains(res.Answer.NoClass, want) {
				t.Fatalf("Infer = %+v, %v; want no class %q", res.Answer, err, want)
			}
		})
	}
}

// TestHistoryNoSymlink: a manifest reached through a symlink is not read.
func TestHistoryNoSymlink(t *testing.T) {
	fx := newFixture(t)
	fx.writeRules(func(r *spec.AnalyzerRules) { r.Rules[2].ConfidenceBP = 7900 }, fx.rulesK)
	a := fx.load()
	req := fx.request(exeMake, "make")
	ref := fx.manifest(opid(1), req.ObservationDigest, "build", nil)
	real := filepath.Join(fx.dir, "elsewhere")
	if err := os.Rename(filepath.Join(fx.records, opid(1)), real); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(fx.records, opid(1))); err != nil {
		t.Fatal(err)
	}
	req.History = []spec.HistoryRef{ref}
	res, err := a.Infer(context.Background(), req, fx.now)
	if err != nil || res.Answer.NoClass == "" {
		t.Fatalf("Infer = %+v, %v; want no class: the symlinked manifest must not count", res.Answer, err)
	}
}

// base sets the make rule's confidence (build for exeMake without image).
func base(bp int) func(*spec.AnalyzerRules) {
	return func(r *spec.AnalyzerRules) { r.Rules[2].ConfidenceBP = bp }
}
