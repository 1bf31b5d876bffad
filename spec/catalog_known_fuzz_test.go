package spec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// sameCatalog: bytes ParseCatalog accepts decode as known to the same
// catalog, contract by contract.
func sameCatalog(t *testing.T, data []byte) {
	t.Helper()
	full, err := ParseCatalog(data)
	if err != nil {
		return
	}
	k, err := DecodeKnownCatalog(data)
	if err != nil {
		t.Fatalf("known decode of strict-accepted bytes: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(full.ContractIDs(), k.ContractIDs()) {
		t.Fatalf("ids %v, want %v", k.ContractIDs(), full.ContractIDs())
	}
	for _, id := range full.ContractIDs() {
		w, _ := full.Contract(id)
		if g, ok := k.Contract(id); !ok || !reflect.DeepEqual(w, g) {
			t.Fatalf("contract %q:\n%+v\nwant\n%+v", id, g, w)
		}
	}
	if !reflect.DeepEqual(full.Selectors, k.Selectors) || !reflect.DeepEqual(full.Analyzers, k.Analyzers) ||
		full.Version != k.Version || full.Schema != k.Schema || !full.IssuedAt.Equal(k.IssuedAt) || !full.ExpiresAt.Equal(k.ExpiresAt) {
		t.Fatal("the known catalog's other fields differ")
	}
	if err := k.Validate(); err != nil {
		t.Fatalf("a known catalog of strict-accepted bytes does not validate: %v", err)
	}
	// With its contracts span, the same catalog, or an error (the caller
	// then decodes the whole).
	start, end, ok := ContractsSpan(data)
	if !ok {
		return
	}
	at, err := DecodeKnownCatalogAt(data, start, end)
	if err != nil {
		return
	}
	if !reflect.DeepEqual(full.ContractIDs(), at.ContractIDs()) {
		t.Fatalf("contracts at %d..%d: ids %v, want %v", start, end, at.ContractIDs(), full.ContractIDs())
	}
	for _, id := range full.ContractIDs() {
		w, _ := full.Contract(id)
		if g, ok := at.Contract(id); !ok || !reflect.DeepEqual(w, g) {
			t.Fatalf("contract %q at %d..%d:\n%+v\nwant\n%+v", id, start, end, g, w)
		}
	}
	if !reflect.DeepEqual(full.Selectors, at.Selectors) || !reflect.DeepEqual(full.Analyzers, at.Analyzers) || !reflect.DeepEqual(full.Verifiers, at.Verifiers) ||
		full.Version != at.Version || full.Schema != at.Schema || !full.IssuedAt.Equal(at.IssuedAt) || !full.ExpiresAt.Equal(at.ExpiresAt) {
		t.Fatalf("the catalog at %d..%d: other fields differ", start, end)
	}
}

// sameEnvelope: bytes ParseEnvelope accepts decode as known to the same
// envelope.
func sameEnvelope(t *testing.T, data []byte) {
	t.Helper()
	full, err := ParseEnvelope(data)
	if err != nil {
		return
	}
	if k, err := DecodeKnownEnvelope(data); err != nil || !reflect.DeepEqual(*full, *k) {
		t.Fatalf("envelope: %+v, %v; want %+v", k, err, full)
	}
	start, end, ok := PayloadSpan(data)
	if !ok {
		t.Fatalf("no payload span in a strict-accepted envelope: %s", data)
	}
	if k, err := DecodeKnownEnvelopeAt(data, start, end); err == nil && !reflect.DeepEqual(*full, *k) {
		t.Fatalf("envelope at %d..%d: %+v; want %+v", start, end, k, full)
	} else if err != nil && !bytes.Contains(data[start:end], []byte(`\`)) {
		t.Fatalf("a plain payload span %d..%d was refused: %v", start, end, err)
	}
}

func FuzzKnownCatalog(f *testing.F) {
	seedCorpus(f, "catalog")
	b, _ := json.Marshal(validCatalog())
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) { sameCatalog(t, data) })
}

func FuzzKnownEnvelope(f *testing.F) {
	seedCorpus(f, "envelope")
	f.Fuzz(func(t *testing.T, data []byte) { sameEnvelope(t, data) })
}

// No span, however hostile, panics, and a span that decodes gives the
// span's bytes as the payload.
func FuzzKnownEnvelopeSpan(f *testing.F) {
	seedCorpus(f, "envelope")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, span := range [][2]int{{0, len(data)}, {len(data) / 3, len(data) / 2}, {-1, 3}, {1 << 62, -(1 << 62)}} {
			if env, err := DecodeKnownEnvelopeAt(data, span[0], span[1]); err == nil && env.Payload != string(data[span[0]+1:span[1]-1]) {
				t.Fatalf("span %v: payload %q", span, env.Payload)
			}
		}
		if s, e, ok := PayloadSpan(data); ok {
			DecodeKnownEnvelopeAt(data, s, e)
		}
	})
}

// No contracts span, however hostile, panics; one that decodes is the
// catalog's own contracts object, for bytes the strict decode accepts.
func FuzzKnownCatalogSpan(f *testing.F) {
	seedCorpus(f, "catalog")
	b, _ := json.Marshal(validCatalog())
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, e, ok := ContractsSpan(data)
		_, strict := ParseCatalog(data)
		for _, span := range [][2]int{{0, len(data)}, {len(data) / 3, len(data) / 2}, {s, e}, {s + 1, e}, {s, e + 1}, {s, len(data)}, {-1, 3}, {1 << 62, -(1 << 62)}} {
			if _, err := DecodeKnownCatalogAt(data, span[0], span[1]); err == nil && strict == nil && (!ok || span != [2]int{s, e}) {
				t.Fatalf("span %v decoded; the contracts lie at %d..%d (found %v)", span, s, e, ok)
			}
		}
	})
}

// Byte-level variants of a valid catalog the strict decode accepts or
// refuses; those it accepts decode the same as known.
func TestKnownCatalogEdges(t *testing.T) {
	b, _ := json.Marshal(validCatalog())
	id := "offline-structured-result"
	for name, v := range map[string][]byte{
		"plain":          b,
		"escaped key":    bytes.Replace(b, []byte(`"contracts":{"`+id+`"`), []byte(`"contracts":{"offline\u002dstructured-result"`), 1),
		"escaped field":  bytes.Replace(b, []byte(`"version":3`), []byte(`"ver\u0073ion":3`), 1),
		"Contracts case": bytes.Replace(b, []byte(`"contracts"`), []byte(`"Contracts"`), 1),
		"dup contracts":  bytes.Replace(b, []byte(`"selectors"`), []byte(`"contracts":{},"selectors"`), 1),
		"whitespace":     bytes.ReplaceAll(b, []byte(`":`), []byte("\" :\n\t ")),
		"float version":  bytes.Replace(b, []byte(`"version":3`), []byte(`"version":3.0`), 1),
	} {
		t.Run(name, func(t *testing.T) { sameCatalog(t, v) })
	}
}
