package spec

import (
	"strings"
	"testing"
	"time"
)

func validRules() AnalyzerRules {
	return AnalyzerRules{Schema: SchemaAnalyzerRules, Analyzer: "ref-analyzer", Version: 1,
		IssuedAt: testIssued, ExpiresAt: testIssued.Add(30 * 24 * time.Hour),
		Rules: []AnalyzerRule{{ID: "go-build", Class: "build", ConfidenceBP: 9000, ExecutableSHA256: []string{strings.Repeat("a", 64)},
			Argv: []string{"go", "build", "**"}, Image: []string{"registry.example/ci:1"}, Env: []string{"PATH=/usr/bin", "GOFLAGS=-mod=mod"}}},
		History: &HistoryPolicy{PerRunBP: 200, MaxBP: 1000}}
}

// TestAnalyzerRulesValidate: every rule needs an executable set (argv,
// image and env only narrow it); env entries are distinct NAME=value.
func TestAnalyzerRulesValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*AnalyzerRule)
		want string // "": valid
	}{
		{"valid", func(*AnalyzerRule) {}, ""},
		{"executable only", func(r *AnalyzerRule) { r.Argv, r.Image, r.Env = nil, nil, nil }, ""},
		{"empty value", func(r *AnalyzerRule) { r.Env = []string{"GOFLAGS="} }, ""},
		{"argv only", func(r *AnalyzerRule) { r.ExecutableSHA256 = nil }, "rules[0].executable_sha256: is required"},
		{"image only", func(r *AnalyzerRule) { r.ExecutableSHA256, r.Argv = nil, nil }, "rules[0].executable_sha256: is required"},
		{"env only", func(r *AnalyzerRule) { r.ExecutableSHA256, r.Argv, r.Image = nil, nil, nil }, "rules[0].executable_sha256: is required"},
		{"bad sha", func(r *AnalyzerRule) { r.ExecutableSHA256 = []string{"abc"} }, "executable_sha256"},
		{"env no =", func(r *AnalyzerRule) { r.Env = []string{"GOFLAGS"} }, "rules[0].env[0]: \"GOFLAGS\" is not a NAME=value entry"},
		{"env bad name", func(r *AnalyzerRule) { r.Env = []string{"1X=y"} }, "rules[0].env[0]"},
		{"env NUL", func(r *AnalyzerRule) { r.Env = []string{"X=a\x00b"} }, "rules[0].env[0]"},
		{"env name twice", func(r *AnalyzerRule) { r.Env = []string{"X=a", "X=b"} }, "rules[0].env[1]: names X again"},
		{"env too many", func(r *AnalyzerRule) {
			r.Env = nil
			for i := range maxRuleEnv + 1 {
				r.Env = append(r.Env, "V"+strings.Repeat("x", i)+"=1")
			}
		}, "rules[0].env: has 65 entries"},
		{"argv ** not last", func(r *AnalyzerRule) { r.Argv = []string{"**", "x"} }, "may only be the last pattern"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := validRules()
			tt.edit(&r.Rules[0])
			err := r.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v; want %q", err, tt.want)
			}
			if tt.want != "" && strings.Contains(err.Error(), "-mod=mod") {
				t.Errorf("the error quotes an env value: %v", err)
			}
		})
	}
}

// TestAnalyzerRulesEnvRoundTrip: env is strictly decoded and kept.
func TestAnalyzerRulesEnvRoundTrip(t *testing.T) {
	data := `{"schema":"gensee.analyzer-rules/v1","analyzer":"ref-analyzer","version":1,"issued_at":"2026-11-29T00:00:00Z","expires_at":"2026-12-29T00:00:00Z",
	  "rules":[{"id":"r","class":"build","confidence_bp":9000,"executable_sha256":["` + strings.Repeat("a", 64) + `"],"env":["LD_PRELOAD=/opt/x.so"]}]}`
	r, err := ParseAnalyzerRules([]byte(data))
	if err != nil || len(r.Rules[0].Env) != 1 || r.Rules[0].Env[0] != "LD_PRELOAD=/opt/x.so" {
		t.Fatalf("ParseAnalyzerRules = %+v, %v", r, err)
	}
	argvOnly := strings.Replace(data, `"executable_sha256":["`+strings.Repeat("a", 64)+`"],`, `"argv":["go","**"],`, 1)
	if _, err := ParseAnalyzerRules([]byte(argvOnly)); err == nil || !strings.Contains(err.Error(), "executable_sha256") {
		t.Fatalf("an argv-only rule parsed: %v", err)
	}
}
