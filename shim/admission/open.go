package admission

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/gensee/gensee/spec"
)

// open verifies the inference envelope against the catalog's analyzer keys
// (spec's Catalog.OpenInference: the payload is parsed only once a catalog
// key verified it, and must name the analyzer whose key signed it).
func open(cat *spec.Catalog, data []byte) (*spec.Inference, *spec.Analyzer, *failure) {
	resend := "attach the analyzer's signed envelope unmodified"
	env, err := spec.ParseEnvelope(data)
	if err != nil {
		return nil, nil, fail(ReasonInferenceMalformed, "annotation "+AnnotationInference+" is not a strict DSSE envelope: "+err.Error(), resend)
	}
	if env.PayloadType != spec.PayloadTypeInference {
		return nil, nil, fail(ReasonInferenceMalformed, fmt.Sprintf("annotation %s has payloadType %q, want %q", AnnotationInference, env.PayloadType, spec.PayloadTypeInference), resend)
	}
	inf, a, err := cat.OpenInference(data)
	switch {
	case errors.Is(err, spec.ErrSignature):
		return nil, nil, attribute(env, cat)
	case err != nil:
		return nil, nil, fail(ReasonInferenceMalformed, "the signed inference payload is invalid: "+err.Error(), "fix the analyzer's output")
	}
	return inf, a, nil
}

// attribute names why no catalog key verified the envelope. It peeks at the
// unverified payload only to word the message: both outcomes refuse, and
// neither allows a safe_default, so the peek cannot change the decision.
func attribute(env *spec.Envelope, cat *spec.Catalog) *failure {
	fix := "attach the inference exactly as the catalog's analyzer signed it; only analyzer keys listed in the catalog are accepted"
	if payload, err := base64.StdEncoding.Strict().DecodeString(env.Payload); err == nil {
		if claim, err := spec.ParseInference(payload); err == nil {
			if cat.Analyzer(claim.Analyzer) == nil {
				return fail(ReasonUnknownAnalyzer, fmt.Sprintf("the inference names analyzer %q, which catalog version %d does not list", claim.Analyzer, cat.Version),
					"use an analyzer the catalog lists, or add this analyzer and its key to the catalog")
			}
			return fail(ReasonBadSignature, fmt.Sprintf("the inference naming analyzer %q is not signed by the key catalog version %d lists for it", claim.Analyzer, cat.Version), fix)
		}
	}
	return fail(ReasonBadSignature, fmt.Sprintf("the inference is not signed by any analyzer key in catalog version %d", cat.Version), fix)
}
