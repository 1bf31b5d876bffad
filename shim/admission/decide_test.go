package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

func TestDecide(t *testing.T) {
	fx := newFixture(t)
	stranger := genKey(t)
	type want struct {
		reason   Reason
		admitted bool
		contract string
		fallback Reason // FallbackFrom; implies SafeDefault
	}
	refused := func(r Reason) want { return want{reason: r} }
	fellBack := func(r Reason) want {
		return want{reason: ReasonSafeDefault, admitted: true, contract: "readonly", fallback: r}
	}
	admitted := want{reason: ReasonAdmitted, admitted: true, contract: "offline"}
	inf := func(mut func(*spec.Inference)) []byte { return fx.env(t, mut) }
	cands := func(c ...spec.Candidate) func(*spec.Inference) {
		return func(in *spec.Inference) { in.Candidates = c }
	}
	c := func(class string, bp int) spec.Candidate { return spec.Candidate{Class: class, ConfidenceBP: bp} }
	byOther := func(cs ...spec.Candidate) []byte { // other-analyzer: min_margin_bp 0, max_lifetime 10m
		return signed(t, spec.PayloadTypeInference, fx.inference(func(i *spec.Inference) {
			i.Analyzer, i.Model, i.Candidates, i.ExpiresAt = "other-analyzer", "m2", cs, fx.now.Add(5*time.Minute)
		}), fx.other)
	}

	cases := []struct {
		name string
		in   func() Input
		want want
	}{
		// admitted
		{"admitted", func() Input { return fx.input(factsStrict, inf(nil)) }, admitted},
		{"admitted at exact thresholds", func() Input {
			return fx.input(factsStrict, inf(cands(c("build", 8000), c("fetch", 7500))))
		}, admitted},
		{"admitted with a lone candidate", func() Input { return fx.input(factsStrict, inf(cands(c("build", 9000)))) }, admitted},
		{"admitted with matching preflight", func() Input {
			in := fx.input(factsStrict, inf(nil))
			in.PreflightObservation = mustJSON(t, fx.obs)
			return in
		}, admitted},
		{"admitted issued within clock skew", func() Input {
			return fx.input(factsStrict, inf(func(i *spec.Inference) { i.IssuedAt = fx.now.Add(ClockSkew) }))
		}, admitted},
		{"admitted by k8s selector", func() Input {
			in := fx.input(factsTeamA, inf(nil))
			in.Catalog = withoutSelector(fx.cat, "k8s-any")
			return in
		}, admitted},
		{"admitted by the other analyzer's own key, lead of 1 bp over min_margin 0", func() Input {
			return fx.input(factsStrict, byOther(c("build", 5001), c("fetch", 5000)))
		}, admitted},

		// catalog and selector
		{"no_catalog", func() Input { in := fx.input(factsStrict, inf(nil)); in.Catalog = nil; return in }, refused(ReasonNoCatalog)},
		{"catalog_expired", func() Input {
			in := fx.input(factsBuilds, nil)
			in.Now = fx.cat.ExpiresAt
			return in
		}, refused(ReasonCatalogExpired)},
		{"no_selector", func() Input { return fx.input(Facts{ContainerdNamespace: "default", Runtime: rt}, inf(nil)) }, refused(ReasonNoSelector)},
		{"no_selector: k8s_namespace needs the fact", func() Input {
			return fx.input(Facts{ContainerdNamespace: "x", Runtime: rt}, inf(nil)) // pods-c sets only k8s_namespace
		}, refused(ReasonNoSelector)},
		{"no_selector ignores safe_default", func() Input { return fx.input(Facts{ContainerdNamespace: "builds", Runtime: "runc"}, nil) }, refused(ReasonNoSelector)},
		{"ambiguous_selector", func() Input { return fx.input(factsTeamA, inf(nil)) }, refused(ReasonAmbiguousSelector)},

		// observation and preflight
		{"observation_invalid", func() Input {
			in := fx.input(factsBuilds, inf(nil))
			in.Observation = spec.Observation{}
			return in
		}, refused(ReasonObservationInvalid)},
		{"safe_default needs no observation without inference", func() Input {
			in := fx.input(factsBuilds, nil)
			in.Observation = spec.Observation{}
			return in
		}, fellBack(ReasonNoInference)},
		{"preflight_mismatch", func() Input {
			in := fx.input(factsBuilds, inf(nil))
			o := fx.obs
			o.UID = 0
			in.PreflightObservation = mustJSON(t, o)
			return in
		}, refused(ReasonPreflightMismatch)},
		{"preflight_mismatch: malformed annotation", func() Input {
			in := fx.input(factsBuilds, nil)
			in.PreflightObservation = []byte(`{"schema":"gensee.observation/v1","uid":0,"UID":1}`)
			return in
		}, refused(ReasonPreflightMismatch)},

		// inference presence and shape
		{"no_inference", func() Input { return fx.input(factsStrict, nil) }, refused(ReasonNoInference)},
		{"safe_default after no_inference", func() Input { return fx.input(factsBuilds, nil) }, fellBack(ReasonNoInference)},
		{"inference_malformed: not JSON", func() Input { return fx.input(factsStrict, []byte("not json")) }, refused(ReasonInferenceMalformed)},
		{"inference_malformed: payloadType", func() Input {
			return fx.input(factsStrict, signed(t, spec.PayloadTypeCatalog, fx.inference(nil), fx.ref))
		}, refused(ReasonInferenceMalformed)},
		{"inference_malformed: signed but unranked", func() Input {
			return fx.input(factsStrict, inf(cands(c("fetch", 100), c("build", 9000))))
		}, refused(ReasonInferenceMalformed)},
		{"safe_default after inference_malformed", func() Input { return fx.input(factsBuilds, []byte("{}")) }, fellBack(ReasonInferenceMalformed)},

		// attribution: never falls back
		{"unknown_analyzer", func() Input {
			return fx.input(factsBuilds, signed(t, spec.PayloadTypeInference, fx.inference(func(i *spec.Inference) { i.Analyzer = "ghost" }), stranger))
		}, refused(ReasonUnknownAnalyzer)},
		{"bad_signature: stranger's key", func() Input {
			return fx.input(factsBuilds, signed(t, spec.PayloadTypeInference, fx.inference(nil), stranger))
		}, refused(ReasonBadSignature)},
		{"bad_signature: other analyzer impersonates ref-analyzer", func() Input {
			return fx.input(factsBuilds, signed(t, spec.PayloadTypeInference, fx.inference(nil), fx.other))
		}, refused(ReasonBadSignature)},
		{"bad_signature: payload swapped after signing", func() Input {
			return fx.input(factsBuilds, swapPayload(t, inf(nil), fx.inference(func(i *spec.Inference) { i.Candidates[0].ConfidenceBP = 9999 })))
		}, refused(ReasonBadSignature)},
		{"observation_mismatch", func() Input {
			return fx.input(factsBuilds, inf(func(i *spec.Inference) { i.ObservationDigest = "sha256:" + strings.Repeat("ab", 32) }))
		}, refused(ReasonObservationMismatch)},

		// verdict quality: falls back where a safe_default exists
		{"unknown_model", func() Input { return fx.input(factsStrict, inf(func(i *spec.Inference) { i.Model = "m2" })) }, refused(ReasonUnknownModel)},
		{"expired", func() Input {
			return fx.input(factsStrict, inf(func(i *spec.Inference) { i.ExpiresAt = fx.now }))
		}, refused(ReasonExpired)},
		{"expired: issued in the future", func() Input {
			return fx.input(factsStrict, inf(func(i *spec.Inference) {
				i.IssuedAt, i.ExpiresAt = fx.now.Add(ClockSkew+time.Second), fx.now.Add(10*time.Minute)
			}))
		}, refused(ReasonExpired)},
		{"safe_default after expired", func() Input {
			return fx.input(factsBuilds, inf(func(i *spec.Inference) { i.ExpiresAt = fx.now.Add(-time.Second) }))
		}, fellBack(ReasonExpired)},
		{"lifetime_exceeded", func() Input {
			return fx.input(factsStrict, inf(func(i *spec.Inference) { i.IssuedAt, i.ExpiresAt = fx.now.Add(-time.Hour), fx.now.Add(time.Second) }))
		}, refused(ReasonLifetimeExceeded)},
		{"class_out_of_scope", func() Input {
			return fx.input(factsStrict, inf(cands(c("build", 9300), c("deploy", 100))))
		}, refused(ReasonClassOutOfScope)},
		{"novel_class", func() Input { return fx.input(factsStrict, inf(cands(c("lint", 9300)))) }, refused(ReasonNovelClass)},
		{"safe_default after novel_class", func() Input { return fx.input(factsBuilds, inf(cands(c("lint", 9300)))) }, fellBack(ReasonNovelClass)},
		{"low_confidence", func() Input { return fx.input(factsStrict, inf(cands(c("build", 7999)))) }, refused(ReasonLowConfidence)},
		{"safe_default after low_confidence", func() Input { return fx.input(factsBuilds, inf(cands(c("build", 7000)))) }, fellBack(ReasonLowConfidence)},
		{"tie_or_low_margin: tie", func() Input {
			return fx.input(factsStrict, inf(cands(c("build", 9000), c("fetch", 9000))))
		}, refused(ReasonTieOrLowMargin)},
		{"tie_or_low_margin: margin below min", func() Input {
			return fx.input(factsStrict, inf(cands(c("build", 9000), c("fetch", 8501))))
		}, refused(ReasonTieOrLowMargin)},
		{"tie_or_low_margin: tie with min_margin 0", func() Input {
			return fx.input(factsStrict, byOther(c("build", 6000), c("fetch", 6000)))
		}, refused(ReasonTieOrLowMargin)},
		{"unrouted", func() Input {
			in := fx.input(factsStrict, inf(nil))
			in.Catalog = withRoute(fx.cat, "strict", "build", "missing")
			return in
		}, refused(ReasonUnrouted)},
		{"safe_default after unrouted", func() Input {
			in := fx.input(factsBuilds, inf(nil))
			in.Catalog = withRoute(fx.cat, "ci-builds", "build", "missing")
			return in
		}, fellBack(ReasonUnrouted)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.in())
			t.Logf("%s", d.Message)
			if d.Reason != tc.want.reason || d.Admitted != tc.want.admitted || d.FallbackFrom != tc.want.fallback ||
				d.SafeDefault != (tc.want.fallback != "") || d.ContractID != tc.want.contract {
				t.Fatalf("got reason=%s admitted=%v contract=%q safe_default=%v fallback_from=%s\nwant %+v",
					d.Reason, d.Admitted, d.ContractID, d.SafeDefault, d.FallbackFrom, tc.want)
			}
			checkShape(t, d)
		})
	}
}

// checkShape holds for every decision.
func checkShape(t *testing.T, d Decision) {
	t.Helper()
	if !strings.HasPrefix(d.Message, string(d.Reason)+": ") || d.Reason != ReasonAdmitted && !strings.Contains(d.Message, "; ") {
		t.Errorf("message %q is not \"<reason>: <what>; <fix>\"", d.Message)
	}
	if d.Admitted != (d.Contract != nil) || d.Admitted != (d.ContractDigest != "") {
		t.Errorf("admitted=%v but contract=%v digest=%q", d.Admitted, d.Contract, d.ContractDigest)
	}
	if d.Admitted && d.Contract.ID != d.ContractID {
		t.Errorf("contract %q carried as %q", d.Contract.ID, d.ContractID)
	}
	if d.Admitted {
		want, _ := spec.Digest(*d.Contract)
		if want != d.ContractDigest {
			t.Errorf("contract digest %s, want %s", d.ContractDigest, want)
		}
	}
	if d.SafeDefault && !d.FallbackFrom.Fallback() {
		t.Errorf("safe_default after %s, which must never fall back", d.FallbackFrom)
	}
}
