package spec

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// MaxReceiptBytes caps a receipt payload: a few hundred bytes of ids,
// digests and times.
const MaxReceiptBytes = 16 << 10

// Receipt verdicts (Receipt.Verdict).
const (
	ReceiptPass = "pass"
	ReceiptFail = "fail"
)

// Receipt is a semantic verifier's signed judgement of one staged product
// (payloadType PayloadTypeReceipt). It binds the verdict to the exact
// product: the operation, the slot, the class and the digest the manifest
// records for it (ProductRecord.Digest). A receipt is guidance from a
// verifier the catalog delegates to; it promotes nothing itself.
type Receipt struct {
	Schema        string `json:"schema"` // SchemaReceipt
	OperationID   string `json:"operation_id"`
	Slot          string `json:"slot"`
	Class         string `json:"class"`
	ProductDigest string `json:"product_digest"` // "sha256:<hex>", as ProductRecord.Digest
	Verdict       string `json:"verdict"`        // ReceiptPass | ReceiptFail
	Verifier      string `json:"verifier"`       // the catalog's verifier id
	// VerifierVersion names the verifier's build (free text, a model id's
	// alphabet: "gensee/0.9.1", "v2@abc123").
	VerifierVersion string `json:"verifier_version"`
	// CriteriaDigest is the sha256 of what the verifier judged against
	// (the JSON Schema of gensee verify json-schema), when it has one.
	CriteriaDigest string `json:"criteria_digest,omitempty"`
	// ConsumerContract is the catalog contract id under which an
	// executable product must run (its consumer envelope). gensee promote
	// refuses a product with executable files without one.
	ConsumerContract string    `json:"consumer_contract,omitempty"`
	IssuedAt         time.Time `json:"issued_at"`
	ExpiresAt        time.Time `json:"expires_at"`
}

// Validate checks a receipt's shape: schema, a 32-hex operation id, a
// clean slot, a product class, the digest, the verdict, the verifier and
// its version, the optional criteria digest and consumer contract id, and
// issued_at < expires_at. Whether the catalog accepts it (signature,
// classes, lifetime, expiry against now) is the promotion's to decide.
func (r *Receipt) Validate() error {
	p := newProblems()
	checkSchema(p, r.Schema, SchemaReceipt)
	if !ValidOperationID(r.OperationID) {
		p.addf("operation_id", "must be an operation id: 32 lowercase hex characters, got %q", truncate(r.OperationID, 80))
	}
	if msg := checkSlot(r.Slot); msg != "" {
		p.add("slot", msg)
	}
	switch {
	case r.Class == "":
		p.add("class", "is required: the product's class")
	case !knownClass(r.Class):
		p.addf("class", "%q is not a product class", truncate(r.Class, 80))
	}
	checkDigest(p, "product_digest", r.ProductDigest)
	if r.Verdict != ReceiptPass && r.Verdict != ReceiptFail {
		p.addf("verdict", "%q is not a verdict: use pass or fail", truncate(r.Verdict, 80))
	}
	checkID(p, "verifier", "verifier id", r.Verifier)
	if !isModel(r.VerifierVersion) {
		p.addf("verifier_version", "%q is not a version: use 1-256 letters, digits or . _ : / @ + -, starting with a letter or digit", truncate(r.VerifierVersion, 80))
	}
	if r.CriteriaDigest != "" {
		checkDigest(p, "criteria_digest", r.CriteriaDigest)
	}
	if r.ConsumerContract != "" {
		checkID(p, "consumer_contract", "contract id", r.ConsumerContract)
	}
	checkWindow(p, r.IssuedAt, r.ExpiresAt)
	return p.err()
}

// ParseReceipt strictly decodes and validates a receipt payload.
func ParseReceipt(data []byte) (*Receipt, error) {
	var r Receipt
	if err := parse(data, &r, MaxReceiptBytes, r.Validate); err != nil {
		return nil, fmt.Errorf("parse receipt: %w", err)
	}
	return &r, nil
}

// OpenedReceipt is a receipt whose envelope a catalog verifier signed.
type OpenedReceipt struct {
	Receipt  *Receipt
	Verifier *Verifier // the catalog's verifier whose key signed it
	// Digest is "sha256:<hex>" of the signed payload bytes: the receipt's
	// identity, whatever envelope carries it.
	Digest string
}

// OpenReceipt verifies a receipt envelope against the catalog's verifier
// keys and returns the receipt with the verifier whose key signed it. The
// payload is parsed only after a signature verified, and the verifier it
// names must be the one whose key signed it (a key delegated to one
// verifier cannot speak for another). Classes, lifetime, expiry and the
// binding to a product are the promotion's checks.
func (c *Catalog) OpenReceipt(envelope []byte) (*OpenedReceipt, error) {
	env, err := ParseEnvelope(envelope)
	if err != nil {
		return nil, fmt.Errorf("open receipt: %w", err)
	}
	if env.PayloadType != PayloadTypeReceipt {
		return nil, fmt.Errorf("open receipt: %w: got %q, want %q", ErrPayloadType, env.PayloadType, PayloadTypeReceipt)
	}
	payload, err := env.DecodePayload()
	if err != nil {
		return nil, fmt.Errorf("open receipt: %w", err)
	}
	for i := range c.Verifiers {
		v := &c.Verifiers[i]
		key, err := v.Key()
		if err != nil {
			continue // a validated catalog has none; never trust a bad key
		}
		if env.VerifyPayload(PayloadTypeReceipt, payload, []ed25519.PublicKey{key}, 1) != nil {
			continue
		}
		r, err := ParseReceipt(payload)
		if err != nil {
			return nil, fmt.Errorf("open receipt: %w", err)
		}
		if r.Verifier != v.ID {
			continue // signed by v's key but names another verifier
		}
		sum := sha256.Sum256(payload)
		return &OpenedReceipt{Receipt: r, Verifier: v, Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
	}
	return nil, fmt.Errorf("open receipt: %w: no verifier in the catalog signed it for the verifier it names", ErrSignature)
}

// Key returns the verifier's ed25519 public key.
func (v *Verifier) Key() (ed25519.PublicKey, error) {
	k, err := ParsePublicKeyHex(v.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("verifier %s: %w", v.ID, err)
	}
	return k, nil
}

// Lifetime is the verifier's max_lifetime (0 if it does not parse, which
// a validated catalog rules out).
func (v *Verifier) Lifetime() time.Duration {
	d, err := parseDuration(v.MaxLifetime)
	if err != nil {
		return 0
	}
	return d
}

// Judges reports whether the verifier may judge products of class.
func (v *Verifier) Judges(class string) bool {
	for _, c := range v.Classes {
		if c == class {
			return true
		}
	}
	return false
}

// Verifier returns the verifier with id, or nil.
func (c *Catalog) Verifier(id string) *Verifier {
	for i := range c.Verifiers {
		if c.Verifiers[i].ID == id {
			return &c.Verifiers[i]
		}
	}
	return nil
}

// Digest is the digest a receipt binds a product record to: its tree
// digest for a directory class (blob_set, directory_tree), else "sha256:"
// and the hex sha256 of the staged file (a single file or a workspace
// patch). Empty when the record holds none.
func (pr ProductRecord) Digest() string {
	if pr.Class == ClassBlobSet || pr.Class == ClassDirectoryTree {
		return pr.TreeDigest
	}
	if pr.SHA256 == "" {
		return ""
	}
	return "sha256:" + pr.SHA256
}

// ValidOperationID reports whether id has an operation id's shape: 32
// lowercase hex characters.
func ValidOperationID(id string) bool {
	return len(id) == 32 && isLowerHex(id)
}
