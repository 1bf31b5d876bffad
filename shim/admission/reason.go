package admission

import "time"

// Reason is a stable decision code, recorded in admission.json, the
// manifest and admission_denied events. Never rename one.
type Reason string

// Outcomes of an admitted decision.
const (
	ReasonAdmitted    Reason = "admitted"     // the inference's class routed to a contract
	ReasonSafeDefault Reason = "safe_default" // the selector's safe_default; see FallbackFrom
)

// Refusal reasons.
const (
	ReasonNoCatalog           Reason = "no_catalog"
	ReasonCatalogExpired      Reason = "catalog_expired"
	ReasonNoSelector          Reason = "no_selector"
	ReasonAmbiguousSelector   Reason = "ambiguous_selector"
	ReasonObservationInvalid  Reason = "observation_invalid"
	ReasonPreflightMismatch   Reason = "preflight_mismatch"
	ReasonNoInference         Reason = "no_inference"
	ReasonInferenceMalformed  Reason = "inference_malformed"
	ReasonUnknownAnalyzer     Reason = "unknown_analyzer"
	ReasonBadSignature        Reason = "bad_signature"
	ReasonObservationMismatch Reason = "observation_mismatch"
	ReasonUnknownModel        Reason = "unknown_model"
	ReasonExpired             Reason = "expired"
	ReasonLifetimeExceeded    Reason = "lifetime_exceeded"
	ReasonClassOutOfScope     Reason = "class_out_of_scope"
	ReasonNovelClass          Reason = "novel_class"
	ReasonLowConfidence       Reason = "low_confidence"
	ReasonTieOrLowMargin      Reason = "tie_or_low_margin"
	ReasonUnrouted            Reason = "unrouted"
	ReasonInternal            Reason = "internal_error"
	// The selector's node analyzer gave no inference: it did not answer
	// in time, or its answer was not one (spec.AnalyzerConsult).
	ReasonAnalyzerUnavailable Reason = "analyzer_unavailable"
	// The selector's node analyzer answered that it names no class.
	ReasonAnalyzerNoClass Reason = "analyzer_no_class"
)

// ClockSkew is how far in the future an inference's issued_at may lie.
const ClockSkew = 2 * time.Minute

// Fallback reports whether a selector's safe_default may stand in after r.
// Only "the inference did not decide" reasons qualify; integrity failures
// (signature, observation, preflight) never do. See the package doc.
func (r Reason) Fallback() bool {
	switch r {
	case ReasonNoInference, ReasonInferenceMalformed, ReasonUnknownModel, ReasonExpired,
		ReasonLifetimeExceeded, ReasonClassOutOfScope, ReasonNovelClass, ReasonLowConfidence,
		ReasonTieOrLowMargin, ReasonUnrouted, ReasonAnalyzerUnavailable, ReasonAnalyzerNoClass:
		return true
	}
	return false
}

// failure is why a step refused: Message renders "<reason>: <what>; <fix>".
type failure struct {
	reason Reason
	what   string
	fix    string
}

func (f *failure) message() string { return string(f.reason) + ": " + f.what + "; " + f.fix }

func fail(r Reason, what, fix string) *failure { return &failure{reason: r, what: what, fix: fix} }
