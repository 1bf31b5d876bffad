package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/gensee/gensee/spec"
)

// evaluate checks the inference annotation for selector sel and returns
// the top class it decides. The summary is set once a catalog analyzer's
// key verified the envelope, even if a later check fails.
func evaluate(in Input, sel *spec.Selector, obsDigest string, c *spec.AnalyzerConsult) (string, *InferenceSummary, *failure) {
	if len(in.InferenceEnvelope) == 0 {
		if c != nil {
			return "", nil, unanswered(sel, c)
		}
		return "", nil, fail(ReasonNoInference, "no annotation "+AnnotationInference,
			fmt.Sprintf("attach an analyzer's signed inference for observation %s, or give selector %q a safe_default", orUnknown(obsDigest), sel.ID))
	}
	inf, a, f := open(in.Catalog, in.InferenceEnvelope)
	if f == nil && c != nil && a.ID != sel.Analyzer.ID {
		f = fail(ReasonBadSignature, fmt.Sprintf("the answer from %s is signed by analyzer %s, but selector %q names analyzer %s", c.Endpoint, a.ID, sel.ID, sel.Analyzer.ID),
			"run the analyzer the selector names on that socket")
	}
	if f != nil {
		return "", nil, rejected(c, f)
	}
	sum := sha256.Sum256(in.InferenceEnvelope)
	top := inf.Candidates[0] // Validate guarantees 1..16 candidates ranked highest first
	margin := top.ConfidenceBP
	if len(inf.Candidates) > 1 {
		margin -= inf.Candidates[1].ConfidenceBP
	}
	s := &InferenceSummary{
		Analyzer: a.ID, Model: inf.Model, Class: top.Class, ConfidenceBP: top.ConfidenceBP, MarginBP: margin,
		ObservationDigest: inf.ObservationDigest, EnvelopeSHA256: hex.EncodeToString(sum[:]),
		IssuedAt: inf.IssuedAt, ExpiresAt: inf.ExpiresAt,
	}
	return top.Class, s, rejected(c, accept(in.Now, inf, a, sel, obsDigest, margin))
}

// accept applies the catalog's rules to a verified inference.
func accept(now time.Time, inf *spec.Inference, a *spec.Analyzer, sel *spec.Selector, obsDigest string, margin int) *failure {
	rerun := "re-run the analyzer or route this workload with a safe_default"
	top := inf.Candidates[0]
	if inf.ObservationDigest != obsDigest {
		return fail(ReasonObservationMismatch, fmt.Sprintf("the inference was made for observation %s, but this container's re-derived observation is %s", inf.ObservationDigest, obsDigest),
			"run the analyzer on this exact image and command (gensee observe shows the observation)")
	}
	if !slices.Contains(a.Models, inf.Model) {
		return fail(ReasonUnknownModel, fmt.Sprintf("model %q is not listed for analyzer %s (listed: %q)", inf.Model, a.ID, a.Models),
			"use a listed model, or add it to the analyzer in the catalog")
	}
	if f := checkTimes(now, inf, a); f != nil {
		return f
	}
	for _, c := range inf.Candidates {
		if !slices.Contains(a.Classes, c.Class) {
			return fail(ReasonClassOutOfScope, fmt.Sprintf("candidate class %q is outside analyzer %s's scope %q", c.Class, a.ID, a.Classes),
				"the analyzer may name only the classes the catalog scopes for it; fix the analyzer or the catalog")
		}
	}
	if _, ok := sel.Routes[top.Class]; !ok {
		return fail(ReasonNovelClass, fmt.Sprintf("top class %q has no route in selector %q", top.Class, sel.ID),
			"add a route for this class to the selector, or give the selector a safe_default")
	}
	if top.ConfidenceBP < a.MinConfidenceBP {
		return fail(ReasonLowConfidence, fmt.Sprintf("top class %q at %d bp is below analyzer %s's threshold %d bp", top.Class, top.ConfidenceBP, a.ID, a.MinConfidenceBP), rerun)
	}
	if need := max(a.MinMarginBP, 1); margin < need { // a tie never passes, even with min_margin_bp 0
		second := "no other class"
		if len(inf.Candidates) > 1 {
			second = fmt.Sprintf("%q", inf.Candidates[1].Class)
		}
		return fail(ReasonTieOrLowMargin, fmt.Sprintf("top class %q leads %s by %d bp; analyzer %s requires a lead of at least %d bp",
			top.Class, second, margin, a.ID, need), rerun)
	}
	return nil
}

func checkTimes(now time.Time, inf *spec.Inference, a *spec.Analyzer) *failure {
	fresh := "obtain a fresh inference from the analyzer (or fix this host's clock)"
	if !now.Before(inf.ExpiresAt) {
		return fail(ReasonExpired, fmt.Sprintf("the inference expired at %s (now %s)", stamp(inf.ExpiresAt), stamp(now)), fresh)
	}
	if inf.IssuedAt.After(now.Add(ClockSkew)) {
		return fail(ReasonExpired, fmt.Sprintf("the inference is issued at %s, more than %s after now (%s)", stamp(inf.IssuedAt), ClockSkew, stamp(now)), fresh)
	}
	limit, err := time.ParseDuration(a.MaxLifetime)
	if err != nil || limit <= 0 {
		return fail(ReasonLifetimeExceeded, fmt.Sprintf("analyzer %s's max_lifetime %q is not a positive duration", a.ID, a.MaxLifetime),
			"fix max_lifetime in the catalog")
	}
	if life := inf.ExpiresAt.Sub(inf.IssuedAt); life > limit {
		return fail(ReasonLifetimeExceeded, fmt.Sprintf("the inference is valid for %s (%s to %s), longer than analyzer %s's max_lifetime %s",
			life, stamp(inf.IssuedAt), stamp(inf.ExpiresAt), a.ID, limit), fmt.Sprintf("have the analyzer issue inferences valid at most %s", limit))
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown: the runtime's observation is incomplete)"
	}
	return s
}
