package verifier

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gensee/gensee/spec"
)

// Judgement is what a verifier concluded about one product.
type Judgement struct {
	OperationID string
	Product     *spec.ProductRecord
	Problems    []string // none: a pass
	Verifier    string   // the catalog's verifier id
	Version     string   // the verifier's build
	Criteria    string   // "sha256:<hex>" of what it judged against, or ""
	Consumer    string   // the consumer contract id, or ""
}

// Verdict is spec.ReceiptPass when there is no problem.
func (j Judgement) Verdict() string {
	if len(j.Problems) == 0 {
		return spec.ReceiptPass
	}
	return spec.ReceiptFail
}

// Receipt is the receipt of j, issued at now (to the second) and living
// ttl, validated as promotion will read it.
func (j Judgement) Receipt(now time.Time, ttl time.Duration) (spec.Receipt, error) {
	issued := now.UTC().Truncate(time.Second)
	r := spec.Receipt{
		Schema: spec.SchemaReceipt, OperationID: j.OperationID, Slot: j.Product.Slot, Class: j.Product.Class,
		ProductDigest: j.Product.Digest(), Verdict: j.Verdict(), Verifier: j.Verifier, VerifierVersion: j.Version,
		CriteriaDigest: j.Criteria, ConsumerContract: j.Consumer, IssuedAt: issued, ExpiresAt: issued.Add(ttl),
	}
	if err := r.Validate(); err != nil {
		return spec.Receipt{}, fmt.Errorf("make receipt: %w", err)
	}
	return r, nil
}

// Sign signs r (its canonical JSON) with key as a DSSE envelope of
// spec.PayloadTypeReceipt and returns the envelope's indented JSON.
func Sign(r spec.Receipt, key ed25519.PrivateKey) ([]byte, error) {
	payload, err := spec.CanonicalJSON(r)
	if err != nil {
		return nil, fmt.Errorf("encode receipt: %w", err)
	}
	env, err := spec.SignEnvelope(spec.PayloadTypeReceipt, payload, key)
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	out, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode receipt envelope: %w", err)
	}
	return append(out, '\n'), nil
}
