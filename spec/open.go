package spec

import (
	"crypto/ed25519"
	"fmt"
)

// OpenCatalog verifies a catalog envelope against the trust anchors
// (threshold distinct keys, payloadType PayloadTypeCatalog) and only then
// strictly parses and validates its payload. Rollback and expiry against the
// clock are the caller's: they need state and time.
func OpenCatalog(envelope []byte, anchors []ed25519.PublicKey, threshold int) (*Catalog, error) {
	env, err := ParseEnvelope(envelope)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	payload, err := env.Verify(PayloadTypeCatalog, anchors, threshold)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	c, err := ParseCatalog(payload)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	return c, nil
}

// OpenInference verifies an inference envelope against the catalog's
// analyzer keys and returns the inference with the analyzer whose key signed
// it. The payload is parsed only after a signature verified, and the
// analyzer it names must be the one whose key signed it (a key delegated to
// one analyzer cannot speak for another). Scope, thresholds, observation and
// expiry checks are the admission's.
func (c *Catalog) OpenInference(envelope []byte) (*Inference, *Analyzer, error) {
	env, err := ParseEnvelope(envelope)
	if err != nil {
		return nil, nil, fmt.Errorf("open inference: %w", err)
	}
	if env.PayloadType != PayloadTypeInference {
		return nil, nil, fmt.Errorf("open inference: %w: got %q, want %q", ErrPayloadType, env.PayloadType, PayloadTypeInference)
	}
	for i := range c.Analyzers {
		a := &c.Analyzers[i]
		key, err := a.Key()
		if err != nil {
			continue // a validated catalog has none; never trust a bad key
		}
		payload, err := env.Verify(PayloadTypeInference, []ed25519.PublicKey{key}, 1)
		if err != nil {
			continue
		}
		in, err := ParseInference(payload)
		if err != nil {
			return nil, nil, fmt.Errorf("open inference: %w", err)
		}
		if in.Analyzer != a.ID {
			continue // signed by a's key but names another analyzer
		}
		return in, a, nil
	}
	return nil, nil, fmt.Errorf("open inference: %w: no analyzer in the catalog signed it for the analyzer it names", ErrSignature)
}

// Key returns the analyzer's ed25519 public key.
func (a *Analyzer) Key() (ed25519.PublicKey, error) {
	k, err := ParsePublicKeyHex(a.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("analyzer %s: %w", a.ID, err)
	}
	return k, nil
}

// Analyzer returns the analyzer with id, or nil.
func (c *Catalog) Analyzer(id string) *Analyzer {
	for i := range c.Analyzers {
		if c.Analyzers[i].ID == id {
			return &c.Analyzers[i]
		}
	}
	return nil
}
