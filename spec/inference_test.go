package spec

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func validInference() Inference {
	return Inference{
		Schema: SchemaInference, Analyzer: "ref-analyzer", Model: "ref-model-1",
		ObservationDigest: "sha256:" + strings.Repeat("0", 64),
		Candidates:        []Candidate{{Class: "build", ConfidenceBP: 9300}, {Class: "fetch", ConfidenceBP: 400}},
		IssuedAt:          testIssued, ExpiresAt: testIssued.Add(time.Hour),
	}
}

func TestInferenceValidate(t *testing.T) {
	many := make([]Candidate, 17)
	for i := range many {
		many[i] = Candidate{Class: "c" + strings.Repeat("x", i), ConfidenceBP: 100 - i}
	}
	tests := []struct {
		name string
		edit func(*Inference)
		want []string
	}{
		{"valid", func(*Inference) {}, nil},
		{"one candidate", func(in *Inference) { in.Candidates = in.Candidates[:1] }, nil},
		{"tie is well formed", func(in *Inference) { in.Candidates[1].ConfidenceBP = 9300 }, nil},
		{"schema", func(in *Inference) { in.Schema = SchemaCatalog }, []string{"schema: must be"}},
		{"analyzer", func(in *Inference) { in.Analyzer = "" }, []string{"analyzer: analyzer id is required"}},
		{"model", func(in *Inference) { in.Model = "m m" }, []string{`model: "m m" is not a valid model id`}},
		{"digest no prefix", func(in *Inference) { in.ObservationDigest = strings.Repeat("0", 64) }, []string{`observation_digest: must be "sha256:"`}},
		{"digest upper", func(in *Inference) { in.ObservationDigest = "sha256:" + strings.Repeat("A", 64) }, []string{"observation_digest: must be"}},
		{"digest short", func(in *Inference) { in.ObservationDigest = "sha256:00" }, []string{"observation_digest: must be"}},
		{"no candidates", func(in *Inference) { in.Candidates = nil }, []string{"candidates: at least one"}},
		{"too many", func(in *Inference) { in.Candidates = many }, []string{"candidates: has 17 candidates, at most 16"}},
		{"dup class", func(in *Inference) { in.Candidates[1].Class = "build" }, []string{`candidates[1].class: "build" duplicates candidates[0].class`}},
		{"empty class", func(in *Inference) { in.Candidates[1].Class = "" }, []string{"candidates[1].class: class is required"}},
		{"bp range", func(in *Inference) { in.Candidates[0].ConfidenceBP = 10001 }, []string{"candidates[0].confidence_bp: 10001 is out of range"}},
		{"negative bp", func(in *Inference) { in.Candidates[1].ConfidenceBP = -1 }, []string{"candidates[1].confidence_bp: -1 is out of range"}},
		{"unranked", func(in *Inference) { in.Candidates[0].ConfidenceBP = 300 }, []string{"candidates[1].confidence_bp: candidates must be ranked"}},
		{"window", func(in *Inference) { in.ExpiresAt = in.IssuedAt.Add(-time.Second) }, []string{"expires_at: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := validInference()
			tt.edit(&in)
			wantErrors(t, in.Validate(), tt.want...)
		})
	}
}

func TestObservationValidate(t *testing.T) {
	good := Observation{Schema: SchemaObservation, UID: 1000, GID: 1000, ExecutableSHA256: strings.Repeat("a", 64), CommandDigest: "sha256:" + strings.Repeat("b", 64)}
	tests := []struct {
		name string
		edit func(*Observation)
		want []string
	}{
		{"valid", func(*Observation) {}, nil},
		{"schema", func(o *Observation) { o.Schema = "" }, []string{`schema: must be "gensee.observation/v1", got ""`}},
		{"exe prefixed", func(o *Observation) { o.ExecutableSHA256 = "sha256:" + strings.Repeat("a", 64) }, []string{"executable_sha256: executable_sha256 must be 64 lowercase hex"}},
		{"command bare", func(o *Observation) { o.CommandDigest = strings.Repeat("b", 64) }, []string{"command_digest: must be"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.edit(&o)
			wantErrors(t, o.Validate(), tt.want...)
		})
	}
}

func signInference(t *testing.T, in Inference, key ed25519.PrivateKey) []byte {
	t.Helper()
	payload, _ := json.Marshal(in)
	env, err := SignEnvelope(PayloadTypeInference, payload, key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(env)
	return b
}

func TestOpenInference(t *testing.T) {
	cat := validCatalog()
	other := cat.Analyzers[0]
	other.ID, other.PublicKey = "other-analyzer", FormatPublicKeyHex(pub(testKey(10)))[:64]
	cat.Analyzers = append(cat.Analyzers, other)
	if err := cat.Validate(); err != nil {
		t.Fatal(err)
	}
	in, a, err := cat.OpenInference(signInference(t, validInference(), testKey(9)))
	if err != nil || a.ID != "ref-analyzer" || in.Model != "ref-model-1" {
		t.Fatalf("OpenInference = %+v, %+v, %v", in, a, err)
	}
	// other-analyzer's key cannot speak for ref-analyzer.
	if _, _, err := cat.OpenInference(signInference(t, validInference(), testKey(10))); !errors.Is(err, ErrSignature) {
		t.Fatalf("cross-analyzer: %v", err)
	}
	if _, _, err := cat.OpenInference(signInference(t, validInference(), testKey(11))); !errors.Is(err, ErrSignature) {
		t.Fatalf("unknown key: %v", err)
	}
	bad := validInference()
	bad.Candidates = []Candidate{} // nil would marshal as null: malformed, not invalid
	if _, _, err := cat.OpenInference(signInference(t, bad, testKey(9))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid payload: %v", err)
	}
	env := signCatalog(t, validCatalog(), PayloadTypeCatalog, testKey(9))
	if _, _, err := cat.OpenInference(env); !errors.Is(err, ErrPayloadType) {
		t.Fatalf("catalog type: %v", err)
	}
}
