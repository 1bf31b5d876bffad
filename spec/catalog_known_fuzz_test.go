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
