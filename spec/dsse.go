package spec

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Envelope limits. The envelope cap must hold the largest payload any
// document allows (MaxCatalogBytes), base64-encoded (4/3 of it), plus
// MaxEnvelopeSigs signatures with keyids and a maximal payloadType, as
// `gensee catalog sign` writes it (indented): 2 MiB leaves about 600 KiB
// for that. TestEnvelopeCapHoldsLargestPayload pins it. 16 signatures is
// more than any threshold scheme we ship and bounds verification work.
const (
	MaxEnvelopeBytes    = 2 << 20
	MaxEnvelopeSigs     = 16
	maxPayloadTypeBytes = 256
)

// PAE is the DSSE v1 pre-authentication encoding of payloadType and payload:
// "DSSEv1" SP len(type) SP type SP len(body) SP body, lengths in decimal
// bytes. Signatures cover these bytes, never the base64 text.
func PAE(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(payload)))
	b.WriteByte(' ')
	b.Write(payload)
	return b.Bytes()
}

// SignEnvelope signs payload under payloadType with every key, in order,
// and returns the envelope. Each signature's keyid is KeyID of the key's
// public half.
func SignEnvelope(payloadType string, payload []byte, keys ...ed25519.PrivateKey) (*Envelope, error) {
	if payloadType == "" {
		return nil, fmt.Errorf("sign envelope: empty payload type")
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("sign envelope: %w: no signing key", ErrKey)
	}
	pae := PAE(payloadType, payload)
	env := &Envelope{PayloadType: payloadType, Payload: base64.StdEncoding.EncodeToString(payload)}
	for i, k := range keys {
		if len(k) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("sign envelope: %w: key %d has %d bytes, want %d", ErrKey, i, len(k), ed25519.PrivateKeySize)
		}
		pub, _ := k.Public().(ed25519.PublicKey)
		env.Signatures = append(env.Signatures, Signature{
			KeyID: KeyID(pub),
			Sig:   base64.StdEncoding.EncodeToString(ed25519.Sign(k, pae)),
		})
	}
	return env, nil
}

// ParseEnvelope strictly decodes a DSSE JSON envelope of at most
// MaxEnvelopeBytes and checks its shape: non-empty payloadType, payload and
// sigs in strict standard base64, 1..MaxEnvelopeSigs signatures of 64 bytes,
// keyids empty or 64 lowercase hex. It verifies nothing; call Verify.
func ParseEnvelope(data []byte) (*Envelope, error) {
	var e Envelope
	if err := DecodeStrict(data, &e, MaxEnvelopeBytes); err != nil {
		return nil, fmt.Errorf("parse envelope: %w", err)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("parse envelope: %w", err)
	}
	return &e, nil
}

// Verify returns the payload bytes only if e.PayloadType equals payloadType
// exactly and at least threshold distinct trusted keys produced valid
// signatures. Keys count by their bytes, not by keyid: a second signature by
// the same key, or the same key listed twice in keys, never counts twice. A
// signature whose keyid is set must name the key it verifies under. Every
// trusted key must be 32 bytes (checked before ed25519.Verify, which panics
// otherwise) and threshold must be at least 1.
func (e *Envelope) Verify(payloadType string, keys []ed25519.PublicKey, threshold int) ([]byte, error) {
	payload, err := e.DecodePayload()
	if err != nil {
		return nil, err
	}
	if err := e.VerifyPayload(payloadType, payload, keys, threshold); err != nil {
		return nil, err
	}
	return payload, nil
}

// DecodePayload is the envelope's payload bytes (strict base64), not yet
// verified: for a caller that verifies them (VerifyPayload) beside other
// work on them, and uses that work only if they verified.
func (e *Envelope) DecodePayload() ([]byte, error) {
	payload, err := decodeStrictBase64(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("verify envelope: payload: %w", err)
	}
	return payload, nil
}

// VerifyPayload is Verify's check of payload, the envelope's decoded
// payload (DecodePayload): its signatures are checked over payload itself.
func (e *Envelope) VerifyPayload(payloadType string, payload []byte, keys []ed25519.PublicKey, threshold int) error {
	if threshold < 1 {
		return fmt.Errorf("verify envelope: threshold %d: must be at least 1", threshold)
	}
	for i, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("verify envelope: %w: trusted key %d has %d bytes, want %d", ErrKey, i, len(k), ed25519.PublicKeySize)
		}
	}
	if e.PayloadType != payloadType {
		return fmt.Errorf("verify envelope: %w: got %q, want %q", ErrPayloadType, e.PayloadType, payloadType)
	}
	pae := PAE(payloadType, payload)
	verified := map[string]bool{} // key bytes of trusted keys with a valid signature
	for _, s := range e.Signatures {
		sig, err := decodeStrictBase64(s.Sig)
		if err != nil || len(sig) != ed25519.SignatureSize {
			continue
		}
		for _, k := range keys {
			if verified[string(k)] || (s.KeyID != "" && s.KeyID != KeyID(k)) {
				continue
			}
			if ed25519.Verify(k, pae, sig) {
				verified[string(k)] = true
				break
			}
		}
	}
	if len(verified) < threshold {
		return fmt.Errorf("verify envelope: %w: %d of %d required trusted keys signed", ErrSignature, len(verified), threshold)
	}
	return nil
}

// decodeStrictBase64 decodes standard, padded base64 with zero pad bits.
// Go's decoder skips CR and LF even in strict mode, so they are refused here.
func decodeStrictBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("%w: base64 contains a line break", ErrMalformed)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not strict standard base64: %w", ErrMalformed, err)
	}
	return b, nil
}
