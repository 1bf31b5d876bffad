package admission

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

const analyzerSock = "/run/gensee/analyzer.sock"

// withAnalyzer is fx's catalog with selectors ci-builds (safe_default
// readonly) and strict (none) naming ref-analyzer's socket.
func withAnalyzer(t *testing.T, c *spec.Catalog) *spec.Catalog {
	t.Helper()
	n := clone(c)
	for i := range n.Selectors {
		if id := n.Selectors[i].ID; id == "ci-builds" || id == "strict" {
			n.Selectors[i].Analyzer = &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: analyzerSock, Timeout: "200ms"}
		}
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	return n
}

// fakeAsker answers every consult with env and outcome and counts the
// consults and what they were asked.
type fakeAsker struct {
	env     []byte
	outcome string
	detail  string
	calls   int
	obs     spec.Observation
	digest  string
	cmd     spec.Command
}

func (a *fakeAsker) ask(sel *spec.Selector, obs spec.Observation, digest string, cmd spec.Command) ([]byte, spec.AnalyzerConsult) {
	a.calls++
	a.obs, a.digest, a.cmd = obs, digest, cmd
	return a.env, spec.AnalyzerConsult{Outcome: a.outcome, Detail: a.detail, TookMicros: 1200}
}

func TestDecideAsksTheAnalyzer(t *testing.T) {
	fx := newFixture(t)
	cat := withAnalyzer(t, fx.cat)
	stranger := genKey(t)
	cmd := spec.Command{Args: []string{"make", "all"}, Env: []string{"PATH=/bin"}, Cwd: "/src"}
	answer := func(env []byte) *fakeAsker { return &fakeAsker{env: env, outcome: spec.ConsultAnswered} }
	none := func(outcome, detail string) *fakeAsker { return &fakeAsker{outcome: outcome, detail: detail} }
	byKey := func(analyzer, model string, key []byte) []byte {
		return signed(t, spec.PayloadTypeInference, fx.inference(func(i *spec.Inference) {
			i.Analyzer, i.Model, i.ExpiresAt = analyzer, model, fx.now.Add(5*time.Minute)
		}), key)
	}
	cases := []struct {
		name     string
		asker    *fakeAsker
		fallback Reason // "": admitted under the route
		outcome  string
		detail   string // in the consult's detail, or the message
	}{
		{"answered", answer(fx.env(t, nil)), "", spec.ConsultAnswered, ""},
		{"answered, outcome left to Decide", &fakeAsker{env: fx.env(t, nil)}, "", spec.ConsultAnswered, ""},
		{"no class", none(spec.ConsultNoClass, "novel: no rule matches"), ReasonAnalyzerNoClass, spec.ConsultNoClass, "novel: no rule matches"},
		{"timeout", none(spec.ConsultTimeout, "no answer within 200ms"), ReasonAnalyzerUnavailable, spec.ConsultTimeout, "no answer within 200ms"},
		{"unreachable", none(spec.ConsultUnreachable, "connect: no such file or directory"), ReasonAnalyzerUnavailable, spec.ConsultUnreachable, "no such file"},
		{"malformed", none(spec.ConsultMalformed, "the answer exceeds 65536 bytes"), ReasonAnalyzerUnavailable, spec.ConsultMalformed, "exceeds"},
		{"answered with nothing", &fakeAsker{}, ReasonAnalyzerUnavailable, spec.ConsultMalformed, "neither an inference nor a reason"},
		{"signed by another analyzer of the catalog", answer(byKey("other-analyzer", "m2", fx.other)), ReasonBadSignature, spec.ConsultRejected, "other-analyzer"},
		{"signed by a key not in the catalog", answer(byKey("ref-analyzer", "ref-model-1", stranger)), ReasonBadSignature, spec.ConsultRejected, ""},
		{"made for another observation", answer(fx.env(t, func(i *spec.Inference) { i.ObservationDigest = "sha256:" + strings.Repeat("9", 64) })),
			ReasonObservationMismatch, spec.ConsultRejected, ""},
		{"expired", answer(fx.env(t, func(i *spec.Inference) {
			i.IssuedAt, i.ExpiresAt = fx.now.Add(-time.Hour), fx.now.Add(-time.Minute)
		})), ReasonExpired, spec.ConsultRejected, ""},
		{"low confidence", answer(fx.env(t, func(i *spec.Inference) { i.Candidates = []spec.Candidate{{Class: "build", ConfidenceBP: 5000}} })),
			ReasonLowConfidence, spec.ConsultRejected, ""},
		{"not an envelope", answer([]byte(`{"payloadType":"x"}`)), ReasonInferenceMalformed, spec.ConsultRejected, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fx.input(factsBuilds, nil)
			in.Catalog, in.Command, in.Ask = cat, cmd, tc.asker.ask
			d := Decide(in)
			if tc.asker.calls != 1 || !reflect.DeepEqual(tc.asker.obs, fx.obs) || tc.asker.digest != fx.obsDig || tc.asker.cmd.Cwd != "/src" {
				t.Fatalf("asked %d times, about %+v (%s), %+v", tc.asker.calls, tc.asker.obs, tc.asker.digest, tc.asker.cmd)
			}
			c := d.Analyzer
			if c == nil || c.Analyzer != "ref-analyzer" || c.Endpoint != analyzerSock || c.Outcome != tc.outcome || c.TookMicros != 1200 {
				t.Fatalf("consult %+v, want outcome %s", c, tc.outcome)
			}
			if tc.fallback == "" {
				if !d.Admitted || d.SafeDefault || d.ContractID != "offline" || d.Reason != ReasonAdmitted || d.Inference == nil {
					t.Fatalf("decision %+v, want admitted under offline", d)
				}
				return
			}
			if !d.Admitted || !d.SafeDefault || d.ContractID != "readonly" || d.FallbackFrom != tc.fallback {
				t.Fatalf("decision %s (%s, from %s), want safe_default from %s", d.Reason, d.Message, d.FallbackFrom, tc.fallback)
			}
			if !strings.Contains(c.Detail+" "+d.Message, tc.detail) {
				t.Errorf("neither detail %q nor message %q says %q", c.Detail, d.Message, tc.detail)
			}
			if tc.outcome == spec.ConsultRejected && (c.Detail != string(tc.fallback) || !strings.Contains(d.Message, "analyzer ref-analyzer's answer from "+analyzerSock)) {
				t.Errorf("rejected consult detail %q, message %q", c.Detail, d.Message)
			}
			rec := Record(d, 3, "sha256:c", fx.now)
			if rec.Analyzer != c || !reflect.DeepEqual(rec.Observation, fx.obs) {
				t.Errorf("recorded %+v", rec)
			}
		})
	}
}

// TestDecideAnalyzerRefusals: without a safe_default, what the analyzer
// did not give refuses, naming the analyzer, its socket and the fix.
func TestDecideAnalyzerRefusals(t *testing.T) {
	fx := newFixture(t)
	cat := withAnalyzer(t, fx.cat)
	cases := []struct {
		name   string
		asker  *fakeAsker
		reason Reason
		want   []string
	}{
		{"timeout", &fakeAsker{outcome: spec.ConsultTimeout, detail: "no answer within 200ms"}, ReasonAnalyzerUnavailable,
			[]string{"analyzer ref-analyzer at " + analyzerSock, "timeout: no answer within 200ms", "check the analyzer at " + analyzerSock, `give selector "strict" a safe_default`}},
		{"unreachable", &fakeAsker{outcome: spec.ConsultUnreachable, detail: "connection refused"}, ReasonAnalyzerUnavailable,
			[]string{"unreachable: connection refused", "gensee analyzer serve"}},
		{"no class", &fakeAsker{outcome: spec.ConsultNoClass, detail: "tie between build and fetch"}, ReasonAnalyzerNoClass,
			[]string{"analyzer ref-analyzer names no class: tie between build and fetch", "add a rule for this observation", `give selector "strict" a safe_default`}},
		{"wrong key", &fakeAsker{env: signed(t, spec.PayloadTypeInference, fx.inference(nil), genKey(t)), outcome: spec.ConsultAnswered}, ReasonBadSignature,
			[]string{"analyzer ref-analyzer's answer from " + analyzerSock}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fx.input(factsStrict, nil)
			in.Catalog, in.Ask = cat, tc.asker.ask
			d := Decide(in)
			checkShape(t, d)
			if d.Admitted || d.Reason != tc.reason {
				t.Fatalf("decision %s: %s", d.Reason, d.Message)
			}
			for _, w := range tc.want {
				if !strings.Contains(d.Message, w) {
					t.Errorf("message %q does not say %q", d.Message, w)
				}
			}
			if rf := d.Refusal(); rf.Reason != string(tc.reason) || rf.Fix == "" {
				t.Errorf("refusal %+v", rf)
			}
		})
	}
}

// TestDecideAnnotationFirst: an attached inference is weighed as before;
// the analyzer is never asked, even when the annotation is bad.
func TestDecideAnnotationFirst(t *testing.T) {
	fx := newFixture(t)
	cat := withAnalyzer(t, fx.cat)
	forged := signed(t, spec.PayloadTypeInference, fx.inference(nil), genKey(t))
	cases := []struct {
		name   string
		facts  Facts
		env    []byte
		reason Reason
	}{
		{"good annotation", factsBuilds, fx.env(t, nil), ReasonAdmitted},
		{"forged annotation", factsBuilds, forged, ReasonBadSignature},
		{"expired annotation", factsBuilds, fx.env(t, func(i *spec.Inference) { i.ExpiresAt = fx.now.Add(-time.Second) }), ReasonSafeDefault},
		{"garbage annotation", factsStrict, []byte("{"), ReasonInferenceMalformed},
	}
	for _, tc := range cases {
		a := &fakeAsker{env: fx.env(t, nil), outcome: spec.ConsultAnswered}
		in := fx.input(tc.facts, tc.env)
		in.Catalog, in.Ask = cat, a.ask
		d := Decide(in)
		checkShape(t, d)
		if a.calls != 0 || d.Analyzer != nil || d.Reason != tc.reason {
			t.Errorf("%s: asked %d times, consult %+v, reason %s (%s)", tc.name, a.calls, d.Analyzer, d.Reason, d.Message)
		}
	}
	// No Asker (a door that has none): no inference, as before.
	d := Decide(Input{Catalog: cat, CatalogVersion: 3, Facts: factsStrict, Observation: fx.obs, Now: fx.now})
	if d.Reason != ReasonNoInference || d.Analyzer != nil {
		t.Errorf("no asker: %s (%+v)", d.Reason, d.Analyzer)
	}
	// A selector without an analyzer is never asked about.
	a := &fakeAsker{}
	in := fx.input(factsTeamA, nil)
	in.Catalog, in.Ask = withoutSelector(cat, "k8s-any"), a.ask
	if d := Decide(in); a.calls != 0 || d.Reason != ReasonNoInference {
		t.Errorf("selector without analyzer: asked %d times, %s", a.calls, d.Reason)
	}
	if NeedsAnalyzer(cat, factsBuilds) != true || NeedsAnalyzer(cat, factsTeamA) || NeedsAnalyzer(nil, factsBuilds) {
		t.Error("NeedsAnalyzer")
	}
}
