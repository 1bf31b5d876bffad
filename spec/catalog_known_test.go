package spec

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
)

// knownCatalog has Catalog's JSON fields, with the contracts left as JSON.
func TestKnownCatalogFields(t *testing.T) {
	fields := func(typ reflect.Type) map[string]reflect.Type {
		out := map[string]reflect.Type{}
		for i := range typ.NumField() {
			if f := typ.Field(i); f.IsExported() {
				out[f.Tag.Get("json")] = f.Type
			}
		}
		return out
	}
	full, known := fields(reflect.TypeFor[Catalog]()), fields(reflect.TypeFor[knownCatalog]())
	if known[`contracts`] != reflect.TypeFor[map[string]json.RawMessage]() {
		t.Fatalf("knownCatalog keeps contracts as %v", known[`contracts`])
	}
	delete(full, "contracts")
	delete(known, "contracts")
	if !reflect.DeepEqual(full, known) {
		t.Fatalf("knownCatalog's fields %v differ from Catalog's %v", known, full)
	}
}

// A catalog decoded as known gives, contract by contract, what the strict
// decode gave (digest included), its ids, and no contract it lacks; its
// contracts may be asked for from several goroutines.
func TestDecodeKnownCatalog(t *testing.T) {
	c := validCatalog()
	other := validContract()
	other.ID = "second"
	other.Network = allowExact(AllowRule{IP: "192.0.2.1", Proto: "tcp", Port: 443})
	c.Contracts[other.ID] = other
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	full, err := ParseCatalog(payload)
	if err != nil {
		t.Fatal(err)
	}
	known, err := DecodeKnownCatalog(payload)
	if err != nil {
		t.Fatal(err)
	}
	if known.Contracts != nil {
		t.Fatal("a known catalog decoded its contracts whole")
	}
	if got, want := known.ContractIDs(), full.ContractIDs(); !slices.Equal(got, want) || len(got) != 2 {
		t.Fatalf("ids %v, want %v", got, want)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, id := range full.ContractIDs() {
				want, _ := full.Contract(id)
				got, ok := known.Contract(id)
				if !ok || !reflect.DeepEqual(got, want) {
					t.Errorf("contract %s: %+v, want %+v", id, got, want)
				}
				gd, _ := Digest(got)
				wd, _ := Digest(want)
				if gd != wd {
					t.Errorf("contract %s digest %s, want %s", id, gd, wd)
				}
			}
		})
	}
	wg.Wait()
	if _, ok := known.Contract("absent"); ok {
		t.Fatal("a known catalog gave a contract it does not hold")
	}
	if !reflect.DeepEqual(known.Selectors, full.Selectors) || !reflect.DeepEqual(known.Analyzers, full.Analyzers) ||
		known.Version != full.Version || !known.ExpiresAt.Equal(full.ExpiresAt) || !known.IssuedAt.Equal(full.IssuedAt) || known.Schema != full.Schema {
		t.Fatal("a known catalog's other fields differ from the strict decode's")
	}
}

// DecodeKnownEnvelope gives what the strict decode gives, for envelopes
// the strict decode accepts with and without escapes in the payload's
// JSON string; it still refuses what Validate refuses but the payload's
// base64 (more signatures than MaxEnvelopeSigs, say).
func TestDecodeKnownEnvelope(t *testing.T) {
	env, err := SignEnvelope(PayloadTypeCatalog, []byte(`{"a":1}`), testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	escaped := bytes.Replace(plain, []byte(`"payload":"e`), []byte(`"payload":"\u0065`), 1)
	if bytes.Equal(escaped, plain) {
		t.Fatalf("no payload to escape in %s", plain)
	}
	for _, data := range [][]byte{plain, escaped} {
		want, err := ParseEnvelope(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeKnownEnvelope(data)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, %v; want %+v", data, got, err, want)
		}
	}
	many := *env
	for len(many.Signatures) <= MaxEnvelopeSigs {
		many.Signatures = append(many.Signatures, env.Signatures[0])
	}
	flood, _ := json.Marshal(&many)
	if _, err := DecodeKnownEnvelope(flood); err == nil {
		t.Fatalf("an envelope of %d signatures decoded", len(many.Signatures))
	}
	if _, err := DecodeKnownEnvelope([]byte(`{"payload":`)); err == nil {
		t.Fatal("a torn envelope decoded")
	}
}

// PayloadSpan finds the payload string of envelopes however laid out, and
// DecodeKnownEnvelopeAt over it gives what the strict decode gives; a span
// that is not the payload's is refused: off by one, overflowing, the whole
// envelope, or another plain string (a keyid) of it.
func TestDecodeKnownEnvelopeAt(t *testing.T) {
	env, err := SignEnvelope(PayloadTypeCatalog, []byte(`{"a":1}`), testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(env)
	indented, _ := json.MarshalIndent(env, "", "  ")
	reordered := []byte(`{ "signatures" : ` + string(mustJSON(t, env.Signatures)) + ` , "payload" :
		"` + env.Payload + `", "payloadType":"` + env.PayloadType + `"}`)
	for _, data := range [][]byte{plain, indented, reordered} {
		want, err := ParseEnvelope(data)
		if err != nil {
			t.Fatal(err)
		}
		start, end, ok := PayloadSpan(data)
		if !ok || string(data[start:end]) != `"`+env.Payload+`"` {
			t.Fatalf("%s: span %d..%d (%v)", data, start, end, ok)
		}
		got, err := DecodeKnownEnvelopeAt(data, start, end)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, %v; want %+v", data, got, err, want)
		}
	}
	start, end, _ := PayloadSpan(plain)
	key := bytes.Index(plain, []byte(`"keyid":"`)) + len(`"keyid":`)
	keyEnd := key + 1 + bytes.IndexByte(plain[key+1:], '"') + 1
	for _, span := range [][2]int{{start + 1, end}, {start, end - 1}, {0, len(plain)}, {-1, end}, {start, len(plain) + 1},
		{math.MaxInt - 6, math.MinInt}, {math.MaxInt, math.MaxInt}, {key, keyEnd}} {
		if got, err := DecodeKnownEnvelopeAt(plain, span[0], span[1]); err == nil {
			t.Fatalf("span %v of %d bytes decoded (payload %q)", span, len(plain), got.Payload)
		}
	}
	escaped := bytes.Replace(plain, []byte(`"payload":"e`), []byte(`"payload":"\\u0065`), 1)
	if s, e, ok := PayloadSpan(escaped); !ok {
		t.Fatal("no span in an escaped envelope")
	} else if _, err := DecodeKnownEnvelopeAt(escaped, s, e); err == nil {
		t.Fatal("an escaped payload span decoded as plain")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
