package spec

import (
	"fmt"
	"path/filepath"
	"time"
)

// MaxPromotionBytes caps one promotion record (one line of
// promotions.jsonl): the receipt envelope inside it is the bulk.
const MaxPromotionBytes = 64 << 10

// Promotion records one product that gensee promote copied out of an
// operation's staging directory: which product (slot, class, digest),
// where to, when, who asked, and the receipt that judged it, envelope
// included. It is appended to the operation's promotions.jsonl; the
// manifest is never changed (its promoted: false describes the run).
type Promotion struct {
	Schema        string    `json:"schema"` // SchemaPromotion
	OperationID   string    `json:"operation_id"`
	Slot          string    `json:"slot"`
	Class         string    `json:"class"`
	ProductDigest string    `json:"product_digest"` // ProductRecord.Digest
	Destination   string    `json:"destination"`    // absolute path written
	At            time.Time `json:"at"`
	By            Promoter  `json:"by"`
	// ReceiptDigest is OpenedReceipt.Digest: sha256 of the signed payload.
	ReceiptDigest    string    `json:"receipt_digest"`
	Verifier         string    `json:"verifier"`
	VerifierVersion  string    `json:"verifier_version"`
	ConsumerContract string    `json:"consumer_contract,omitempty"`
	Receipt          *Envelope `json:"receipt"`
}

// Promoter is who promoted, as the kernel says, and what the environment
// claims beside it.
type Promoter struct {
	UID uint32 `json:"uid"` // the real uid gensee promote ran as
	// InvokingUID is the account that asked, by the kernel's facts: the
	// nearest ancestor whose real uid is not 0 (the caller of sudo, su or
	// doas), else 0.
	InvokingUID  uint32 `json:"invoking_uid"`
	InvokingUser string `json:"invoking_user,omitempty"`
	// SudoUser is $SUDO_USER as the environment claims it; never checked.
	SudoUser string `json:"sudo_user,omitempty"`
}

// Validate checks a promotion record's shape.
func (pr *Promotion) Validate() error {
	p := newProblems()
	checkSchema(p, pr.Schema, SchemaPromotion)
	if !ValidOperationID(pr.OperationID) {
		p.addf("operation_id", "must be 32 lowercase hex characters, got %q", truncate(pr.OperationID, 80))
	}
	if msg := checkSlot(pr.Slot); msg != "" {
		p.add("slot", msg)
	}
	if !knownClass(pr.Class) {
		p.addf("class", "%q is not a product class", truncate(pr.Class, 80))
	}
	checkDigest(p, "product_digest", pr.ProductDigest)
	if !filepath.IsAbs(pr.Destination) || filepath.Clean(pr.Destination) != pr.Destination {
		p.addf("destination", "%q must be an absolute, clean path", truncate(pr.Destination, 80))
	}
	if pr.At.IsZero() {
		p.add("at", "is required (RFC 3339 time)")
	}
	checkDigest(p, "receipt_digest", pr.ReceiptDigest)
	checkID(p, "verifier", "verifier id", pr.Verifier)
	if pr.Receipt == nil {
		p.add("receipt", "is required: the receipt envelope")
	} else if err := pr.Receipt.Validate(); err != nil {
		p.addf("receipt", "is not a DSSE envelope: %v", err)
	}
	return p.err()
}

// ParsePromotion strictly decodes and validates one promotions.jsonl line.
func ParsePromotion(data []byte) (*Promotion, error) {
	var pr Promotion
	if err := parse(data, &pr, MaxPromotionBytes, pr.Validate); err != nil {
		return nil, fmt.Errorf("parse promotion: %w", err)
	}
	return &pr, nil
}
