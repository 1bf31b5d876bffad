package reference

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// TestRulesMatch: a rule matches on every field it sets (executable set,
// argv patterns "*", "x*", "**", image), each class takes its best rule,
// and the answer is an inference the catalog's key verifies.
func TestRulesMatch(t *testing.T) {
	fx := newFixture(t)
	a := fx.load()
	for _, tt := range []struct {
		name  string
		exe   string
		args  []string
		image string
		want  []spec.Candidate // nil: no class
	}{
		{"argv ** with more", exeGo, []string{"go", "build", "./...", "-v"}, "", []spec.Candidate{{Class: "build", ConfidenceBP: 9000}}},
		{"argv ** with none", exeGo, []string{"go", "build"}, "", []spec.Candidate{{Class: "build", ConfidenceBP: 9000}}},
		{"argv * one", exeGo, []string{"go", "vet", "./x"}, "", []spec.Candidate{{Class: "lint", ConfidenceBP: 9000}}},
		{"argv * none", exeGo, []string{"go", "vet"}, "", nil},
		{"argv * two", exeGo, []string{"go", "vet", "a", "b"}, "", nil},
		{"other executable", exeMake, []string{"go", "build"}, "", []spec.Candidate{{Class: "build", ConfidenceBP: 7000}}},
		{"argv prefix", exeGo, []string{"go", "mod", "download"}, "", []spec.Candidate{{Class: "fetch", ConfidenceBP: 9500}}},
		{"argv of another executable", exeMake, []string{"go", "mod", "download"}, "", []spec.Candidate{{Class: "build", ConfidenceBP: 7000}}},
		{"argv prefix exact", exeGo, []string{"go", "mod", "down"}, "", []spec.Candidate{{Class: "fetch", ConfidenceBP: 9500}}},
		{"argv prefix miss", exeGo, []string{"go", "mod", "tidy"}, "", nil},
		{"image refines", exeMake, []string{"make"}, "registry.example/ci:1", []spec.Candidate{{Class: "build", ConfidenceBP: 8500}}},
		{"unknown executable", strings.Repeat("3", 64), []string{"make"}, "registry.example/ci:1", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := fx.request(tt.exe, tt.args...)
			req.Image = tt.image
			scores, _, _ := a.matchRules(&req)
			var got []spec.Candidate
			if len(scores) > 0 {
				got, _ = a.rank(context.Background(), &req, req.ObservationDigest, fx.now)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("candidates %v, want %v", got, tt.want)
			}
		})
	}
	req := fx.request(exeGo, "go", "build", "./...")
	res, err := a.Infer(context.Background(), req, fx.now)
	if err != nil {
		t.Fatal(err)
	}
	in := open(t, fx, res.Answer)
	if in.Model != DefaultModel || in.ObservationDigest != req.ObservationDigest || !in.IssuedAt.Equal(fx.now) ||
		in.ExpiresAt.Sub(in.IssuedAt) != DefaultLifetime || res.Answer.Schema != spec.SchemaAnalyzerAnswer {
		t.Errorf("inference %+v, answer schema %q", in, res.Answer.Schema)
	}
}

// TestNoClass: a novel observation, a tie, a low confidence, a low margin,
// an unrouted class and expired rules name no class, and say which.
func TestNoClass(t *testing.T) {
	goBuild := []string{"go", "build", "./..."}
	for _, tt := range []struct {
		name  string
		rules func(*spec.AnalyzerRules)
		cat   func(*spec.Catalog)
		exe   string
		args  []string
		later time.Duration
		want  string
	}{
		{name: "novel", exe: exeGo, args: []string{"go", "test"}, want: "novel observation: no rule matches"},
		{name: "tie", exe: exeGo, args: goBuild, rules: also(spec.AnalyzerRule{ID: "t", Class: "fetch", ConfidenceBP: 9000, ExecutableSHA256: []string{exeGo}}),
			want: "tie between build and fetch at 9000 bp"},
		{name: "low confidence", exe: exeMake, args: []string{"make"}, want: "class build at 7000 bp is below analyzer's min_confidence_bp 8000"},
		{name: "low margin", exe: exeGo, args: goBuild, rules: also(spec.AnalyzerRule{ID: "m", Class: "fetch", ConfidenceBP: 8700, ExecutableSHA256: []string{exeGo}}),
			want: "class build at 9000 bp leads fetch by 300 bp, below analyzer's min_margin_bp 500"},
		{name: "single below margin", exe: exeGo, args: goBuild, cat: func(c *spec.Catalog) { c.Analyzers[0].MinConfidenceBP, c.Analyzers[0].MinMarginBP = 0, 9500 },
			want: "class build at 9000 bp leads no other class by 9000 bp, below analyzer's min_margin_bp 9500"},
		{name: "no route", exe: exeGo, args: []string{"go", "vet", "x"}, cat: func(c *spec.Catalog) { delete(c.Selectors[0].Routes, "lint") },
			want: "class lint at 9000 bp has no route in selector ci-builds"},
		{name: "rules expired", exe: exeGo, args: goBuild, later: 31 * 24 * time.Hour, want: "rules version 1 expired"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			if tt.cat != nil {
				tt.cat(fx.cat)
			}
			fx.writeRules(tt.rules, fx.rulesK)
			res, err := fx.load().Infer(context.Background(), fx.request(tt.exe, tt.args...), fx.now.Add(tt.later))
			if err != nil || len(res.Answer.Inference) != 0 || !strings.Contains(res.Answer.NoClass, tt.want) {
				t.Fatalf("Infer = %+v, %v; want no class %q", res.Answer, err, tt.want)
			}
		})
	}
}

func also(r spec.AnalyzerRule) func(*spec.AnalyzerRules) {
	return func(rs *spec.AnalyzerRules) { rs.Rules = append(rs.Rules, r) }
}

// TestBadRequest: a request for another analyzer, one whose observation
// digest or command does not match, and a malformed one are refused, not
// answered.
func TestBadRequest(t *testing.T) {
	fx := newFixture(t)
	a := fx.load()
	other := fx.request(exeMake, "make")
	for _, tt := range []struct {
		name string
		mut  func(*spec.AnalyzerRequest)
		says string
	}{
		{"other analyzer", func(r *spec.AnalyzerRequest) { r.Analyzer = "other-analyzer" }, `for analyzer "other-analyzer"`},
		{"observation digest", func(r *spec.AnalyzerRequest) { r.ObservationDigest = other.ObservationDigest }, "the observation digests to"},
		{"command", func(r *spec.AnalyzerRequest) { r.Command.Env = append(r.Command.Env, "EXTRA=1") }, "the command digests to"},
		{"cwd", func(r *spec.AnalyzerRequest) { r.Command.Cwd = "/" }, "the command digests to"},
		{"schema", func(r *spec.AnalyzerRequest) { r.Schema = "x" }, "schema"},
		{"door", func(r *spec.AnalyzerRequest) { r.Door = "cri" }, "door"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := fx.request(exeGo, "go", "build")
			tt.mut(&req)
			_, err := a.Infer(context.Background(), req, fx.now)
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Infer = %v; want a bad request saying %q", err, tt.says)
			}
			if strings.Contains(err.Error(), "secret-cache") {
				t.Errorf("the error quotes an environment value: %v", err)
			}
		})
	}
}

// TestLifetimeBounds: an inference lives the configured lifetime, never
// past max_lifetime nor the rules' expiry.
func TestLifetimeBounds(t *testing.T) {
	fx := newFixture(t)
	fx.writeRules(func(r *spec.AnalyzerRules) { r.ExpiresAt = fx.now.Add(3 * time.Minute) }, fx.rulesK)
	a := fx.load()
	res, err := a.Infer(context.Background(), fx.request(exeGo, "go", "build"), fx.now.Add(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if in := open(t, fx, res.Answer); !in.IssuedAt.Equal(fx.now) || !in.ExpiresAt.Equal(fx.now.Add(3*time.Minute)) {
		t.Errorf("issued %s expires %s; want %s and the rules' expiry", in.IssuedAt, in.ExpiresAt, fx.now)
	}
}
