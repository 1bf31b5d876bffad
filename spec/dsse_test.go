package spec

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// testKey derives a deterministic key from a one-byte seed.
func testKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

const testType = "application/vnd.gensee.test+json"

func signed(t *testing.T, payload string, keys ...ed25519.PrivateKey) *Envelope {
	t.Helper()
	env, err := SignEnvelope(testType, []byte(payload), keys...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// reparse round-trips env through JSON and ParseEnvelope.
func reparse(t *testing.T, env *Envelope) (*Envelope, error) {
	t.Helper()
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return ParseEnvelope(b)
}

func TestDSSERoundTrip(t *testing.T) {
	k := testKey(1)
	env, err := reparse(t, signed(t, `{"x":1}`, k))
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.Verify(testType, []ed25519.PublicKey{pub(k)}, 1)
	if err != nil || string(got) != `{"x":1}` {
		t.Fatalf("Verify = %q, %v", got, err)
	}
	if env.Signatures[0].KeyID != KeyID(pub(k)) {
		t.Fatalf("keyid = %s", env.Signatures[0].KeyID)
	}
}

func TestPAE(t *testing.T) {
	// Test vector from the DSSE protocol document.
	got := string(PAE("http://example.com/HelloWorld", []byte("hello world")))
	want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
	if got != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
}

func TestDSSETamper(t *testing.T) {
	k, other := testKey(1), testKey(2)
	trusted := []ed25519.PublicKey{pub(k)}
	flipPayload := signed(t, `{"x":1}`, k)
	p, _ := base64.StdEncoding.DecodeString(flipPayload.Payload)
	p[2] ^= 1
	flipPayload.Payload = base64.StdEncoding.EncodeToString(p)

	flipSig := signed(t, `{"x":1}`, k)
	s, _ := base64.StdEncoding.DecodeString(flipSig.Signatures[0].Sig)
	s[10] ^= 0x40
	flipSig.Signatures[0].Sig = base64.StdEncoding.EncodeToString(s)

	tests := []struct {
		name      string
		env       *Envelope
		typ       string
		keys      []ed25519.PublicKey
		threshold int
		want      error
	}{
		{"flipped payload byte", flipPayload, testType, trusted, 1, ErrSignature},
		{"flipped signature bit", flipSig, testType, trusted, 1, ErrSignature},
		{"wrong payload type", signed(t, `{}`, k), PayloadTypeCatalog, trusted, 1, ErrPayloadType},
		{"untrusted key", signed(t, `{}`, other), testType, trusted, 1, ErrSignature},
		{"same key twice, threshold 2", signed(t, `{}`, k, k), testType, trusted, 2, ErrSignature},
		{"trusted key listed twice", signed(t, `{}`, k, k), testType, []ed25519.PublicKey{pub(k), pub(k)}, 2, ErrSignature},
		{"31-byte trusted key", signed(t, `{}`, k), testType, []ed25519.PublicKey{pub(k)[:31]}, 1, ErrKey},
		{"empty trusted key", signed(t, `{}`, k), testType, []ed25519.PublicKey{nil}, 1, ErrKey},
		{"no trusted keys", signed(t, `{}`, k), testType, nil, 1, ErrSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.env.Verify(tt.typ, tt.keys, tt.threshold)
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("Verify = %q, %v; want nil, %v", got, err, tt.want)
			}
		})
	}
}

func TestDSSEThreshold(t *testing.T) {
	a, b := testKey(1), testKey(2)
	keys := []ed25519.PublicKey{pub(a), pub(b)}
	if _, err := signed(t, `{}`, a, b).Verify(testType, keys, 2); err != nil {
		t.Fatalf("two distinct keys, threshold 2: %v", err)
	}
	if _, err := signed(t, `{}`, a, b).Verify(testType, keys, 0); err == nil {
		t.Fatal("threshold 0 accepted")
	}
	// The same signature repeated under a different (empty) keyid still
	// counts once.
	env := signed(t, `{}`, a)
	env.Signatures = append(env.Signatures, Signature{Sig: env.Signatures[0].Sig})
	if _, err := env.Verify(testType, keys, 2); !errors.Is(err, ErrSignature) {
		t.Fatalf("duplicate signature reached threshold 2: %v", err)
	}
}

func TestDSSEKeyID(t *testing.T) {
	a, b := testKey(1), testKey(2)
	// keyid names b, signature is by a: the hint must be right when given.
	env := signed(t, `{}`, a)
	env.Signatures[0].KeyID = KeyID(pub(b))
	if _, err := env.Verify(testType, []ed25519.PublicKey{pub(a), pub(b)}, 1); !errors.Is(err, ErrSignature) {
		t.Fatalf("mismatched keyid: err = %v, want ErrSignature", err)
	}
	// An empty keyid is allowed (DSSE makes it optional): every trusted key is tried.
	env.Signatures[0].KeyID = ""
	if _, err := env.Verify(testType, []ed25519.PublicKey{pub(b), pub(a)}, 1); err != nil {
		t.Fatalf("empty keyid: %v", err)
	}
	// A malformed keyid fails parsing.
	env.Signatures[0].KeyID = strings.ToUpper(KeyID(pub(a)))
	if _, err := reparse(t, env); !errors.Is(err, ErrInvalid) {
		t.Fatalf("uppercase keyid: err = %v, want ErrInvalid", err)
	}
}

func TestSignEnvelopeErrors(t *testing.T) {
	if _, err := SignEnvelope(testType, nil); !errors.Is(err, ErrKey) {
		t.Fatalf("no keys: %v", err)
	}
	if _, err := SignEnvelope(testType, nil, ed25519.PrivateKey(make([]byte, 31))); !errors.Is(err, ErrKey) {
		t.Fatalf("short key: %v", err)
	}
	if _, err := SignEnvelope("", nil, testKey(1)); err == nil {
		t.Fatal("empty payload type accepted")
	}
}

func TestParseEnvelope(t *testing.T) {
	good := signed(t, `{}`, testKey(1))
	sig := good.Signatures[0].Sig
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"unknown field", `{"payloadType":"a","payload":"e30=","signatures":[],"extra":1}`, ErrMalformed},
		{"case folded", `{"PayloadType":"a","payload":"e30=","signatures":[]}`, ErrMalformed},
		{"no signatures", `{"payloadType":"a","payload":"e30=","signatures":[]}`, ErrInvalid},
		{"url-safe payload", `{"payloadType":"a","payload":"_-8=","signatures":[{"keyid":"","sig":"` + sig + `"}]}`, ErrInvalid},
		{"unpadded payload", `{"payloadType":"a","payload":"e30","signatures":[{"keyid":"","sig":"` + sig + `"}]}`, ErrInvalid},
		{"raw newline in payload", `{"payloadType":"a","payload":"e3` + "\n" + `0=","signatures":[{"keyid":"","sig":"` + sig + `"}]}`, ErrMalformed},
		{"escaped newline in payload", `{"payloadType":"a","payload":"e3\\n0=","signatures":[{"keyid":"","sig":"` + sig + `"}]}`, ErrInvalid},
		{"non-zero pad bits", `{"payloadType":"a","payload":"e31=","signatures":[{"keyid":"","sig":"` + sig + `"}]}`, ErrInvalid},
		{"short sig", `{"payloadType":"a","payload":"e30=","signatures":[{"keyid":"","sig":"e30="}]}`, ErrInvalid},
		{"too large", `{"payloadType":"a","payload":"` + strings.Repeat("A", MaxEnvelopeBytes) + `","signatures":[]}`, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseEnvelope([]byte(tt.in)); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestEnvelopeCapHoldsLargestPayload pins the relation between the payload
// caps and the envelope cap: a payload at its document's cap, signed by
// MaxEnvelopeSigs keys under a payloadType of the maximal length and
// written indented (as `gensee catalog sign` does), still parses. A smaller
// envelope cap would let a valid catalog be signed but never loaded.
func TestEnvelopeCapHoldsLargestPayload(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
	}{{"catalog", MaxCatalogBytes}, {"inference", MaxInferenceBytes}} {
		t.Run(tc.name, func(t *testing.T) {
			keys := make([]ed25519.PrivateKey, MaxEnvelopeSigs)
			for i := range keys {
				keys[i] = testKey(byte(i + 1))
			}
			// 0xff bytes encode to base64 without padding shortcuts; any
			// byte string of this length encodes to the same length.
			payload := strings.Repeat("\xff", tc.max)
			env, err := SignEnvelope(strings.Repeat("t", maxPayloadTypeBytes), []byte(payload), keys...)
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.MarshalIndent(env, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, '\n')
			if len(data) > MaxEnvelopeBytes {
				t.Fatalf("a %d-byte payload makes a %d-byte envelope, over MaxEnvelopeBytes %d", tc.max, len(data), MaxEnvelopeBytes)
			}
			if base64.StdEncoding.EncodedLen(tc.max) >= MaxEnvelopeBytes {
				t.Fatalf("base64 of %d bytes alone fills MaxEnvelopeBytes", tc.max)
			}
			if _, err := ParseEnvelope(data); err != nil {
				t.Fatalf("ParseEnvelope of the largest envelope: %v", err)
			}
		})
	}
}

// VerifyPayload checks the signatures over the bytes it is given: the
// envelope's decoded payload verifies, any other bytes do not.
func TestVerifyPayload(t *testing.T) {
	k := testKey(1)
	env := signed(t, `{"a":1}`, k)
	payload, err := env.DecodePayload()
	if err != nil || string(payload) != `{"a":1}` {
		t.Fatalf("payload %q, %v", payload, err)
	}
	keys := []ed25519.PublicKey{pub(k)}
	if err := env.VerifyPayload(testType, payload, keys, 1); err != nil {
		t.Fatalf("the signed payload does not verify: %v", err)
	}
	if err := env.VerifyPayload(testType, []byte(`{"a":2}`), keys, 1); !errors.Is(err, ErrSignature) {
		t.Fatalf("other bytes verified: %v", err)
	}
	if err := env.VerifyPayload("other/type", payload, keys, 1); !errors.Is(err, ErrPayloadType) {
		t.Fatalf("another payload type verified: %v", err)
	}
}
