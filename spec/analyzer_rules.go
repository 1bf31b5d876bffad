package spec

import (
	"crypto/ed25519"
	"fmt"
)

// MaxAnalyzerRulesBytes caps an analyzer rule set payload.
const MaxAnalyzerRulesBytes = 1 << 20

// ParseAnalyzerRules strictly decodes and validates an analyzer rule set
// payload. Call it only on a payload whose envelope verified (see
// OpenAnalyzerRules), or before signing one.
func ParseAnalyzerRules(data []byte) (*AnalyzerRules, error) {
	var r AnalyzerRules
	if err := parse(data, &r, MaxAnalyzerRulesBytes, r.Validate); err != nil {
		return nil, fmt.Errorf("parse analyzer rules: %w", err)
	}
	return &r, nil
}

// OpenAnalyzerRules verifies a rules envelope against key (an analyzer's
// rules_key; payloadType PayloadTypeAnalyzerRules) and only then strictly
// parses and validates its payload. Whether the rules are for the right
// analyzer, in their validity window and within its class scope is the
// caller's.
func OpenAnalyzerRules(envelope []byte, key ed25519.PublicKey) (*AnalyzerRules, error) {
	env, err := ParseEnvelope(envelope)
	if err != nil {
		return nil, fmt.Errorf("open analyzer rules: %w", err)
	}
	payload, err := env.Verify(PayloadTypeAnalyzerRules, []ed25519.PublicKey{key}, 1)
	if err != nil {
		return nil, fmt.Errorf("open analyzer rules: %w", err)
	}
	r, err := ParseAnalyzerRules(payload)
	if err != nil {
		return nil, fmt.Errorf("open analyzer rules: %w", err)
	}
	return r, nil
}

// RulesPublicKey returns the analyzer's rules_key; an error when it has
// none or it is malformed.
func (a *Analyzer) RulesPublicKey() (ed25519.PublicKey, error) {
	if a.RulesKey == "" {
		return nil, fmt.Errorf("analyzer %s: %w: no rules_key", a.ID, ErrKey)
	}
	k, err := ParsePublicKeyHex(a.RulesKey)
	if err != nil {
		return nil, fmt.Errorf("analyzer %s: rules_key: %w", a.ID, err)
	}
	return k, nil
}

// InferencePayload validates in and returns the bytes an analyzer signs:
// its canonical JSON.
func InferencePayload(in Inference) ([]byte, error) {
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("inference payload: %w", err)
	}
	b, err := CanonicalJSON(in)
	if err != nil {
		return nil, fmt.Errorf("inference payload: %w", err)
	}
	return b, nil
}

// SignInference signs InferencePayload(in) with key as a DSSE envelope of
// PayloadTypeInference: what an annotation, or an analyzer's answer,
// carries.
func SignInference(in Inference, key ed25519.PrivateKey) (*Envelope, error) {
	payload, err := InferencePayload(in)
	if err != nil {
		return nil, err
	}
	env, err := SignEnvelope(PayloadTypeInference, payload, key)
	if err != nil {
		return nil, fmt.Errorf("sign inference: %w", err)
	}
	return env, nil
}
