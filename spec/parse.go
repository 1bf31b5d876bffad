package spec

import "fmt"

// Size caps for outside documents.
const (
	MaxContractBytes    = 256 << 10
	MaxCatalogBytes     = 1 << 20 // the payload; MaxEnvelopeBytes leaves room for it in base64
	MaxInferenceBytes   = 64 << 10
	MaxObservationBytes = 16 << 10
)

// ParseContract strictly decodes and validates a contract document.
func ParseContract(data []byte) (*Contract, error) {
	var c Contract
	if err := parse(data, &c, MaxContractBytes, c.Validate); err != nil {
		return nil, fmt.Errorf("parse contract: %w", err)
	}
	return &c, nil
}

// ParseCatalog strictly decodes and validates a catalog payload. Call it
// only on a payload whose envelope verified (see OpenCatalog).
func ParseCatalog(data []byte) (*Catalog, error) {
	var c Catalog
	if err := parse(data, &c, MaxCatalogBytes, c.Validate); err != nil {
		return nil, fmt.Errorf("parse catalog: %w", err)
	}
	return &c, nil
}

// ParseInference strictly decodes and validates an inference payload.
func ParseInference(data []byte) (*Inference, error) {
	var in Inference
	if err := parse(data, &in, MaxInferenceBytes, in.Validate); err != nil {
		return nil, fmt.Errorf("parse inference: %w", err)
	}
	return &in, nil
}

// ParseObservation strictly decodes and validates an observation.
func ParseObservation(data []byte) (*Observation, error) {
	var o Observation
	if err := parse(data, &o, MaxObservationBytes, o.Validate); err != nil {
		return nil, fmt.Errorf("parse observation: %w", err)
	}
	return &o, nil
}

// parse decodes into v, then runs validate (a method value bound to v).
func parse(data []byte, v any, maxBytes int, validate func() error) error {
	if err := DecodeStrict(data, v, maxBytes); err != nil {
		return err
	}
	return validate()
}
