package spec

// Envelope is a DSSE JSON envelope.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"` // standard base64
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature; KeyID is the hex sha256 of the public key.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"` // standard base64 ed25519 signature over PAE
}

// Validate checks the envelope's shape (see ParseEnvelope); it verifies no
// signature.
func (e *Envelope) Validate() error { return e.validate(true) }

// validate is Validate; payload64 false leaves out the payload's base64
// check (for a caller that decodes it strictly next: DecodePayload).
func (e *Envelope) validate(payload64 bool) error {
	p := newProblems()
	switch {
	case e.PayloadType == "":
		p.add("payloadType", "is required")
	case len(e.PayloadType) > maxPayloadTypeBytes || !printable(e.PayloadType):
		p.addf("payloadType", "must be 1-%d printable characters without spaces", maxPayloadTypeBytes)
	}
	if e.Payload == "" {
		p.add("payload", "is required")
	} else if payload64 {
		if _, err := decodeStrictBase64(e.Payload); err != nil {
			p.add("payload", "must be strict standard base64 (padded, no line breaks)")
		}
	}
	switch n := len(e.Signatures); {
	case n == 0:
		p.add("signatures", "at least one signature is required")
	case n > MaxEnvelopeSigs:
		p.addf("signatures", "%d signatures, at most %d allowed", n, MaxEnvelopeSigs)
	}
	for i, s := range e.Signatures {
		path := joinIndex("signatures", i)
		if s.KeyID != "" && !IsHex64(s.KeyID) {
			p.add(joinKey(path, "keyid"), "must be empty or 64 lowercase hex characters (sha256 of the public key)")
		}
		if b, err := decodeStrictBase64(s.Sig); err != nil || len(b) != 64 {
			p.add(joinKey(path, "sig"), "must be a 64-byte ed25519 signature in strict standard base64")
		}
	}
	return p.err()
}
