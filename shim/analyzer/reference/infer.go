package reference

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gensee/gensee/spec"
)

// maxCandidates is the most candidates an inference carries
// (spec.Inference.Validate).
const maxCandidates = 16

// ErrBadRequest matches (errors.Is) every refusal of a malformed request:
// the handler answers it with 400.
var ErrBadRequest = errors.New("bad analyzer request")

// Result is an answer and what the log says of it.
type Result struct {
	Answer spec.AnalyzerAnswer
	// Digest is the observation digest the analyzer computed.
	Digest string
	// Top is the signed top candidate (nil for no class).
	Top *spec.Candidate
}

// Infer answers req at now: a signed inference, or the reason for no
// class. An error wrapping ErrBadRequest means the request is malformed,
// for another analyzer, or its observation and command disagree.
func (a *Analyzer) Infer(ctx context.Context, req spec.AnalyzerRequest, now time.Time) (Result, error) {
	digest, err := a.check(&req)
	if err != nil {
		return Result{}, err
	}
	res := Result{Digest: digest, Answer: spec.AnalyzerAnswer{Schema: spec.SchemaAnalyzerAnswer}}
	cands, why := a.rank(ctx, &req, digest, now)
	if why == "" {
		why = a.refusal(&req, cands)
	}
	if why != "" {
		res.Answer.NoClass = why
		return res, nil
	}
	env, err := a.sign(cands, digest, now)
	if err != nil {
		return Result{}, err
	}
	res.Answer.Inference, res.Top = env, &cands[0]
	return res, nil
}

// check validates req and returns the observation digest the analyzer
// computed itself.
func (a *Analyzer) check(req *spec.AnalyzerRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if req.Analyzer != a.entry.ID {
		return "", fmt.Errorf("%w: the request is for analyzer %q; this is analyzer %q", ErrBadRequest, req.Analyzer, a.entry.ID)
	}
	cmd, err := req.Command.Digest()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if cmd != req.Observation.CommandDigest {
		return "", fmt.Errorf("%w: the command digests to %s, but the observation's command_digest is %s", ErrBadRequest, cmd, req.Observation.CommandDigest)
	}
	digest, err := req.Observation.Digest()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if digest != req.ObservationDigest {
		return "", fmt.Errorf("%w: the observation digests to %s, but the request names %s", ErrBadRequest, digest, req.ObservationDigest)
	}
	return digest, nil
}

// rank returns the candidates, highest first (ties by class name), or why
// there are none.
func (a *Analyzer) rank(ctx context.Context, req *spec.AnalyzerRequest, digest string, now time.Time) ([]spec.Candidate, string) {
	if !now.Before(a.rules.ExpiresAt) {
		return nil, fmt.Sprintf("the analyzer's rules version %d expired at %s", a.rules.Version, stamp(a.rules.ExpiresAt))
	}
	scores, _, unpinned := a.matchRules(req)
	if unpinned != "" {
		return nil, unpinned
	}
	if len(scores) == 0 {
		return nil, "novel observation: no rule matches"
	}
	counts, withheld := a.history(ctx, req.History, digest)
	cands := make([]spec.Candidate, 0, len(scores))
	for class, bp := range scores {
		if _, ok := withheld[class]; ok {
			continue
		}
		if h := a.rules.History; h != nil && counts[class] > 0 {
			bp = min(bp+min(counts[class]*h.PerRunBP, h.MaxBP), 10000)
		}
		cands = append(cands, spec.Candidate{Class: class, ConfidenceBP: bp})
	}
	if len(cands) == 0 {
		classes := slices.Sorted(maps.Keys(withheld))
		return nil, fmt.Sprintf("class %s withheld: earlier operation %s of this observation under it did not end clean (until its record is removed)", classes[0], withheld[classes[0]])
	}
	slices.SortFunc(cands, func(x, y spec.Candidate) int {
		return cmp.Or(cmp.Compare(y.ConfidenceBP, x.ConfidenceBP), cmp.Compare(x.Class, y.Class))
	})
	return cands[:min(len(cands), maxCandidates)], ""
}

// refusal says why the runtime would refuse cands (as shim/admission's
// accept does for what the analyzer can see), or "".
func (a *Analyzer) refusal(req *spec.AnalyzerRequest, cands []spec.Candidate) string {
	top := cands[0]
	if sel := a.selector(req.Selector); sel != nil {
		if _, ok := sel.Routes[top.Class]; !ok {
			return fmt.Sprintf("class %s at %d bp has no route in selector %s", top.Class, top.ConfidenceBP, sel.ID)
		}
	}
	if top.ConfidenceBP < a.entry.MinConfidenceBP {
		return fmt.Sprintf("class %s at %d bp is below analyzer's min_confidence_bp %d", top.Class, top.ConfidenceBP, a.entry.MinConfidenceBP)
	}
	second, margin := spec.Candidate{Class: "no other class"}, top.ConfidenceBP
	if len(cands) > 1 {
		second = cands[1]
		margin -= second.ConfidenceBP
	}
	switch {
	case margin == 0 && len(cands) > 1:
		return fmt.Sprintf("tie between %s and %s at %d bp", top.Class, second.Class, top.ConfidenceBP)
	case margin < max(a.entry.MinMarginBP, 1): // a tie never passes, even with min_margin_bp 0
		return fmt.Sprintf("class %s at %d bp leads %s by %d bp, below analyzer's min_margin_bp %d", top.Class, top.ConfidenceBP, second.Class, margin, a.entry.MinMarginBP)
	}
	return ""
}

// selector is the catalog's selector id, or nil (the runtime's catalog
// may be newer than the analyzer's).
func (a *Analyzer) selector(id string) *spec.Selector {
	for i := range a.catalog.Selectors {
		if a.catalog.Selectors[i].ID == id {
			return &a.catalog.Selectors[i]
		}
	}
	return nil
}

// sign makes and signs the inference: issued now (to the second), living
// the analyzer's lifetime but never past its rules' expiry.
func (a *Analyzer) sign(cands []spec.Candidate, digest string, now time.Time) (json.RawMessage, error) {
	issued := now.UTC().Truncate(time.Second)
	expires := issued.Add(a.lifetime)
	if a.rules.ExpiresAt.Before(expires) {
		expires = a.rules.ExpiresAt.UTC()
	}
	in := spec.Inference{Schema: spec.SchemaInference, Analyzer: a.entry.ID, Model: a.model, ObservationDigest: digest,
		Candidates: cands, IssuedAt: issued, ExpiresAt: expires}
	env, err := spec.SignInference(in, a.key)
	if err != nil {
		return nil, fmt.Errorf("analyzer %s: %w", a.entry.ID, err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode inference envelope: %w", err)
	}
	return b, nil
}
