package spec

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// seedCorpus adds every corpus file of the given documents to f.
func seedCorpus(f *testing.F, docs ...string) {
	for _, doc := range docs {
		files, _ := filepath.Glob(filepath.Join("testdata", "corpus", doc, "*", "*.json"))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// roundTrip re-encodes an accepted document and requires the same parser
// to accept it again, equal, and valid.
func roundTrip[T any](t *testing.T, v *T, parse func([]byte) (*T, error), validate func(*T) error) {
	t.Helper()
	if err := validate(v); err != nil {
		t.Fatalf("accepted document does not validate: %v", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-marshal: %v", err)
	}
	again, err := parse(b)
	if err != nil {
		t.Fatalf("re-encoded document rejected: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(normalize(t, v), normalize(t, again)) {
		t.Fatalf("round trip changed the document:\n%+v\n%+v", v, again)
	}
}

// normalize compares documents through their JSON form (time zones and
// nil-vs-empty slices differ in Go but not in meaning).
func normalize(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func FuzzParseContract(f *testing.F) {
	seedCorpus(f, "contract")
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseContract(data)
		if err != nil {
			return
		}
		roundTrip(t, c, ParseContract, (*Contract).Validate)
	})
}

func FuzzParseCatalog(f *testing.F) {
	seedCorpus(f, "catalog")
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalog(data)
		if err != nil {
			return
		}
		roundTrip(t, c, ParseCatalog, (*Catalog).Validate)
	})
}

func FuzzParseInference(f *testing.F) {
	seedCorpus(f, "inference")
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseInference(data)
		if err != nil {
			return
		}
		roundTrip(t, in, ParseInference, (*Inference).Validate)
	})
}

func FuzzParseReceipt(f *testing.F) {
	seedCorpus(f, "receipt")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseReceipt(data)
		if err != nil {
			return
		}
		roundTrip(t, r, ParseReceipt, (*Receipt).Validate)
	})
}

// FuzzOpenReceipt: whatever the envelope holds, opening it against a
// catalog with verifiers never panics, and what opens names the verifier
// whose key signed it.
func FuzzOpenReceipt(f *testing.F) {
	seedCorpus(f, "envelope")
	cat := validCatalog()
	cat.Verifiers = []Verifier{validVerifier()}
	if payload, err := json.Marshal(validReceipt()); err == nil {
		if env, err := SignEnvelope(PayloadTypeReceipt, payload, testKey(20)); err == nil {
			b, _ := json.Marshal(env)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := cat.OpenReceipt(data)
		if err != nil {
			return
		}
		if o.Receipt.Verifier != o.Verifier.ID {
			t.Fatalf("receipt names %q, opened as %q", o.Receipt.Verifier, o.Verifier.ID)
		}
	})
}

func FuzzParseObservation(f *testing.F) {
	seedCorpus(f, "observation")
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := ParseObservation(data)
		if err != nil {
			return
		}
		roundTrip(t, o, ParseObservation, (*Observation).Validate)
		if _, err := o.Digest(); err != nil {
			t.Fatalf("digest of a valid observation: %v", err)
		}
	})
}

func FuzzParseEnvelope(f *testing.F) {
	seedCorpus(f, "envelope")
	key := pub(testKey(1))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEnvelope(data)
		if err != nil {
			return
		}
		roundTrip(t, e, ParseEnvelope, (*Envelope).Validate)
		// Verification must never panic, whatever the envelope holds.
		_, _ = e.Verify(e.PayloadType, []ed25519.PublicKey{key}, 1)
		_, _ = e.Verify(PayloadTypeCatalog, []ed25519.PublicKey{key}, 1)
	})
}

// FuzzVerifyKeys: keys of any length never make Verify panic.
func FuzzVerifyKeys(f *testing.F) {
	f.Add([]byte{}, 1)
	f.Add(make([]byte, 31), 1)
	f.Add([]byte(pub(testKey(1))), 2)
	env, err := SignEnvelope(PayloadTypeCatalog, []byte(`{}`), testKey(1))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key []byte, threshold int) {
		_, _ = env.Verify(PayloadTypeCatalog, []ed25519.PublicKey{key, key}, threshold)
	})
}

// FuzzDecodeStrict: never panics, and anything strict decoding accepts is
// decoded by encoding/json to the same value (strict is a subset).
func FuzzDecodeStrict(f *testing.F) {
	seedCorpus(f, "contract", "catalog", "inference", "observation", "envelope", "manifest", "event")
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict Catalog
		if err := DecodeStrict(data, &strict, 1<<20); err == nil {
			var loose Catalog
			if err := json.Unmarshal(data, &loose); err != nil {
				t.Fatalf("strict accepted what encoding/json rejects: %v", err)
			}
			if normalize(t, strict) != normalize(t, loose) {
				t.Fatalf("strict and encoding/json disagree:\n%+v\n%+v", strict, loose)
			}
		}
		var m Manifest
		_ = DecodeStrict(data, &m, 1<<20)
		var v any
		if err := DecodeStrict(data, &v, 1<<20); err == nil {
			if b, err := CanonicalJSON(v); err == nil {
				var again any
				if err := DecodeStrict(b, &again, len(b)); err != nil {
					t.Fatalf("canonical JSON does not decode strictly: %v\n%s", err, b)
				}
				if b2, err := CanonicalJSON(again); err != nil || string(b2) != string(b) {
					t.Fatalf("canonical JSON is not a fixed point:\n%s\n%s", b, b2)
				}
			}
		}
	})
}
