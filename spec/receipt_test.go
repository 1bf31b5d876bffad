package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// validVerifier is a verifier of structured results signing with testKey(20).
func validVerifier() Verifier {
	return Verifier{ID: "json-schema", PublicKey: hex.EncodeToString(pub(testKey(20))),
		Classes: []string{ClassStructuredResult}, MaxLifetime: "24h"}
}

func validReceipt() Receipt {
	return Receipt{
		Schema: SchemaReceipt, OperationID: "00112233445566778899aabbccddeeff", Slot: "out/result.json",
		Class: ClassStructuredResult, ProductDigest: "sha256:" + strings.Repeat("ab", 32), Verdict: ReceiptPass,
		Verifier: "json-schema", VerifierVersion: "gensee/0.9.1", IssuedAt: testIssued, ExpiresAt: testIssued.Add(time.Hour),
	}
}

func TestReceiptValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Receipt)
		want []string
	}{
		{"valid", func(*Receipt) {}, nil},
		{"fail verdict, criteria, consumer", func(r *Receipt) {
			r.Verdict, r.CriteriaDigest, r.ConsumerContract = ReceiptFail, "sha256:"+strings.Repeat("cd", 32), "run-tool"
		}, nil},
		{"schema", func(r *Receipt) { r.Schema = SchemaInference }, []string{`schema: must be "gensee.receipt/v1"`}},
		{"operation id", func(r *Receipt) { r.OperationID = "xyz" }, []string{`operation_id: must be an operation id`}},
		{"slot", func(r *Receipt) { r.Slot = "out/../x" }, []string{`slot: "out/../x" contains ".."`}},
		{"class missing", func(r *Receipt) { r.Class = "" }, []string{"class: is required"}},
		{"class unknown", func(r *Receipt) { r.Class = "build" }, []string{`class: "build" is not a product class`}},
		{"digest", func(r *Receipt) { r.ProductDigest = strings.Repeat("ab", 32) }, []string{`product_digest: must be "sha256:"`}},
		{"verdict", func(r *Receipt) { r.Verdict = "PASS" }, []string{`verdict: "PASS" is not a verdict`}},
		{"verifier", func(r *Receipt) { r.Verifier = "" }, []string{"verifier: verifier id is required"}},
		{"version", func(r *Receipt) { r.VerifierVersion = "" }, []string{`verifier_version: "" is not a version`}},
		{"criteria", func(r *Receipt) { r.CriteriaDigest = "md5:x" }, []string{`criteria_digest: must be "sha256:"`}},
		{"consumer", func(r *Receipt) { r.ConsumerContract = "a b" }, []string{`consumer_contract: "a b" is not a valid contract id`}},
		{"window", func(r *Receipt) { r.ExpiresAt = r.IssuedAt }, []string{"expires_at: 2026-11-29T00:00:00Z is not after issued_at"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validReceipt()
			tt.edit(&r)
			wantErrors(t, r.Validate(), tt.want...)
		})
	}
}

func signReceipt(t *testing.T, r Receipt, typ string, key []byte) []byte {
	t.Helper()
	payload, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	env, err := SignEnvelope(typ, payload, key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(env)
	return b
}

// TestOpenReceipt: a receipt opens only under the key of the verifier it
// names; another verifier's key, an unknown key, another payload type and
// an invalid payload are refused, each with its sentinel.
func TestOpenReceipt(t *testing.T) {
	cat := validCatalog()
	other := validVerifier()
	other.ID, other.PublicKey = "other", hex.EncodeToString(pub(testKey(21)))
	cat.Verifiers = []Verifier{validVerifier(), other}
	if err := cat.Validate(); err != nil {
		t.Fatal(err)
	}
	env := signReceipt(t, validReceipt(), PayloadTypeReceipt, testKey(20))
	o, err := cat.OpenReceipt(env)
	if err != nil || o.Verifier.ID != "json-schema" || o.Receipt.Slot != "out/result.json" || !strings.HasPrefix(o.Digest, "sha256:") {
		t.Fatalf("OpenReceipt = %+v, %v", o, err)
	}
	payload, _ := json.Marshal(validReceipt())
	if sum := sha256.Sum256(payload); o.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("digest %q, want the signed payload's sha256", o.Digest)
	}
	if _, err := cat.OpenReceipt(signReceipt(t, validReceipt(), PayloadTypeReceipt, testKey(21))); !errors.Is(err, ErrSignature) {
		t.Fatalf("another verifier's key: %v", err)
	}
	if _, err := cat.OpenReceipt(signReceipt(t, validReceipt(), PayloadTypeReceipt, testKey(22))); !errors.Is(err, ErrSignature) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := cat.OpenReceipt(signReceipt(t, validReceipt(), PayloadTypeInference, testKey(20))); !errors.Is(err, ErrPayloadType) {
		t.Fatalf("inference type: %v", err)
	}
	bad := validReceipt()
	bad.Verdict = "maybe"
	if _, err := cat.OpenReceipt(signReceipt(t, bad, PayloadTypeReceipt, testKey(20))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid payload: %v", err)
	}
	if _, err := cat.OpenReceipt([]byte("{}")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty envelope: %v", err)
	}
	noVerifiers := validCatalog()
	if _, err := noVerifiers.OpenReceipt(env); !errors.Is(err, ErrSignature) {
		t.Fatalf("a catalog without verifiers: %v", err)
	}
}

func TestVerifierHelpers(t *testing.T) {
	cat := validCatalog()
	cat.Verifiers = []Verifier{validVerifier()}
	v := cat.Verifier("json-schema")
	if v == nil || cat.Verifier("x") != nil {
		t.Fatal("Verifier lookup")
	}
	if v.Lifetime() != 24*time.Hour || !v.Judges(ClassStructuredResult) || v.Judges(ClassBlob) {
		t.Fatalf("lifetime %s, judges %v", v.Lifetime(), v.Classes)
	}
	if k, err := v.Key(); err != nil || len(k) != 32 {
		t.Fatalf("key %x, %v", k, err)
	}
}

func TestProductRecordDigest(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for _, c := range []struct {
		pr   ProductRecord
		want string
	}{
		{ProductRecord{Class: ClassStructuredResult, SHA256: sha}, "sha256:" + sha},
		{ProductRecord{Class: ClassWorkspacePatch, SHA256: sha}, "sha256:" + sha},
		{ProductRecord{Class: ClassDirectoryTree, SHA256: sha, TreeDigest: "sha256:" + strings.Repeat("cd", 32)}, "sha256:" + strings.Repeat("cd", 32)},
		{ProductRecord{Class: ClassBlobSet}, ""},
		{ProductRecord{Class: ClassBlob}, ""},
	} {
		if got := c.pr.Digest(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.pr, got, c.want)
		}
	}
}

func TestPromotionValidate(t *testing.T) {
	env, _ := SignEnvelope(PayloadTypeReceipt, []byte("{}"), testKey(20))
	pr := Promotion{Schema: SchemaPromotion, OperationID: "00112233445566778899aabbccddeeff", Slot: "out/result.json",
		Class: ClassStructuredResult, ProductDigest: "sha256:" + strings.Repeat("ab", 32), Destination: "/srv/out/result.json",
		At: testIssued, ReceiptDigest: "sha256:" + strings.Repeat("cd", 32), Verifier: "json-schema", VerifierVersion: "1", Receipt: env}
	b, _ := json.Marshal(pr)
	if _, err := ParsePromotion(b); err != nil {
		t.Fatal(err)
	}
	pr.Destination, pr.Receipt = "srv/../x", nil
	wantErrors(t, pr.Validate(), `destination: "srv/../x" must be an absolute, clean path`, "receipt: is required")
}
