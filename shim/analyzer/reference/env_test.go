package reference

import (
	"context"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

// requestEnv is fx.request with the command's environment env.
func (fx *fixture) requestEnv(exe string, env []string, args ...string) spec.AnalyzerRequest {
	fx.t.Helper()
	req := fx.request(exe, args...)
	req.Command.Env = env
	cd, err := req.Command.Digest()
	if err != nil {
		fx.t.Fatal(err)
	}
	req.Observation.CommandDigest = cd
	if req.ObservationDigest, err = req.Observation.Digest(); err != nil {
		fx.t.Fatal(err)
	}
	return req
}

// TestProtectedEnvNoClass: a command whose environment sets a variable
// that makes the executable load or run other code (spec.ProtectedEnv,
// PATH aside) gets no class, naming the variable, unless the matching
// rule pins that exact entry.
func TestProtectedEnvNoClass(t *testing.T) {
	goBuild := []string{"go", "build", "./..."}
	pinned := func(r *spec.AnalyzerRules) { r.Rules[0].Env = []string{"GOFLAGS=-mod=mod", "PATH=/usr/bin"} }
	for _, tt := range []struct {
		name  string
		rules func(*spec.AnalyzerRules)
		env   []string
		want  string // "": build at 9000
	}{
		{"PATH alone", nil, []string{"PATH=/opt/evil/bin"}, ""},
		{"data variables", nil, []string{"PATH=/usr/bin", "HOME=/root", "CI=true", "HOSTNAME=x"}, ""},
		{"LD_PRELOAD", nil, []string{"PATH=/usr/bin", "LD_PRELOAD=/workspace/x.so"}, "sets LD_PRELOAD, which rule go-build does not pin"},
		{"GOFLAGS toolexec", nil, []string{"GOFLAGS=-toolexec=/workspace/sh"}, "sets GOFLAGS"},
		{"NODE_OPTIONS", nil, []string{"NODE_OPTIONS=--require=/w/x.js"}, "sets NODE_OPTIONS"},
		{"OPENSSL_CONF", nil, []string{"OPENSSL_CONF=/w/openssl.cnf"}, "sets OPENSSL_CONF"},
		{"GIT_SSH_COMMAND", nil, []string{"GIT_SSH_COMMAND=/w/x"}, "sets GIT_SSH_COMMAND"},
		{"GIT_CONFIG_KEY_0", nil, []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.fsmonitor"}, "sets GIT_CONFIG_COUNT"},
		{"without =", nil, []string{"LD_PRELOAD"}, "sets LD_PRELOAD"},
		{"pinned", pinned, []string{"PATH=/usr/bin", "GOFLAGS=-mod=mod"}, ""},
		{"pinned, another value", pinned, []string{"PATH=/usr/bin", "GOFLAGS=-toolexec=/w/sh"}, "novel observation"},
		{"pinned, another variable too", pinned, []string{"PATH=/usr/bin", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=go1.99"}, "sets GOTOOLCHAIN"},
		{"pinned twice", pinned, []string{"PATH=/usr/bin", "GOFLAGS=-mod=mod", "GOFLAGS=-toolexec=/w/sh"}, "sets GOFLAGS"},
		{"pin narrows", pinned, []string{"GOFLAGS=-mod=mod"}, "novel observation"}, // the rule pins PATH=/usr/bin too
		{"a rule that pins wins", func(r *spec.AnalyzerRules) {
			r.Rules = append(r.Rules, spec.AnalyzerRule{ID: "go-build-preload", Class: "build", ConfidenceBP: 8800,
				ExecutableSHA256: []string{exeGo}, Env: []string{"LD_PRELOAD=/opt/libjemalloc.so"}})
		}, []string{"LD_PRELOAD=/opt/libjemalloc.so"}, "build at 8800"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.writeRules(tt.rules, fx.rulesK)
			res, err := fx.load().Infer(context.Background(), fx.requestEnv(exeGo, tt.env, goBuild...), fx.now)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "":
				if in := open(t, fx, res.Answer); in.Candidates[0] != (spec.Candidate{Class: "build", ConfidenceBP: 9000}) {
					t.Fatalf("candidates %v", in.Candidates)
				}
			case tt.want == "build at 8800":
				if in := open(t, fx, res.Answer); in.Candidates[0] != (spec.Candidate{Class: "build", ConfidenceBP: 8800}) {
					t.Fatalf("candidates %v", in.Candidates)
				}
			case !strings.Contains(res.Answer.NoClass, tt.want) || len(res.Answer.Inference) != 0:
				t.Fatalf("answer %+v; want no class %q", res.Answer, tt.want)
			}
			if strings.Contains(res.Answer.NoClass, "/w") || strings.Contains(res.Answer.NoClass, "x.so") {
				t.Errorf("the reason quotes a value: %q", res.Answer.NoClass)
			}
		})
	}
}

// TestRulesNeedExecutable: an argv-only rule is refused (the analyzer
// does not start), so an attacker's binary named like a tool is novel.
func TestRulesNeedExecutable(t *testing.T) {
	fx := newFixture(t)
	fx.writeRules(also(spec.AnalyzerRule{ID: "any-go", Class: "fetch", ConfidenceBP: 9500, Argv: []string{"go", "mod", "**"}}), fx.rulesK)
	if _, err := Load(context.Background(), fx.config()); err == nil || !strings.Contains(err.Error(), "executable_sha256") {
		t.Fatalf("Load = %v; want the argv-only rule refused", err)
	}
	fx = newFixture(t)
	res, err := fx.load().Infer(context.Background(), fx.request(strings.Repeat("e", 64), "go", "mod", "download"), fx.now)
	if err != nil || res.Answer.NoClass != "novel observation: no rule matches" {
		t.Fatalf("another binary named go: %+v, %v", res.Answer, err)
	}
}
