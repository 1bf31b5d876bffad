package hostrun

import (
	"testing"

	"github.com/gensee/gensee/shim/admission"
)

// TestFieldOf: a refusal names --inference only when the caller gave one
// (or should give one); the analyzer's failures and answers name it.
func TestFieldOf(t *testing.T) {
	cases := []struct {
		reason   admission.Reason
		attached bool
		want     string
	}{
		{admission.ReasonBadSignature, true, "--inference"},
		{admission.ReasonBadSignature, false, "analyzer"},
		{admission.ReasonObservationMismatch, false, "analyzer"},
		{admission.ReasonNoInference, false, "--inference"},
		{admission.ReasonAnalyzerUnavailable, false, "analyzer"},
		{admission.ReasonAnalyzerNoClass, false, "analyzer"},
		{admission.ReasonPreflightMismatch, false, "--observation"},
		{admission.ReasonNoSelector, true, "facts (runtime host, user)"},
	}
	for _, tc := range cases {
		if got := fieldOf(tc.reason, tc.attached); got != tc.want {
			t.Errorf("fieldOf(%s, %v) = %q, want %q", tc.reason, tc.attached, got, tc.want)
		}
	}
}
