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

// knownEnvelopes is a signed envelope and layouts of it the strict decode
// accepts: compact, indented, keys reordered with odd whitespace, and the
// payload's JSON string holding an escape.
func knownEnvelopes(t *testing.T) (*Envelope, map[string][]byte) {
	t.Helper()
	env, err := SignEnvelope(PayloadTypeCatalog, []byte(`{"a":1}`), testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(env)
	indented, _ := json.MarshalIndent(env, "", "  ")
	sigs, _ := json.Marshal(env.Signatures)
	reordered := []byte(`{ "signatures" : ` + string(sigs) + ` , "payload" :
		"` + env.Payload + `", "payloadType":"` + env.PayloadType + `"}`)
	escaped := bytes.Replace(plain, []byte(`"payload":"e`), []byte(`"payload":"\u0065`), 1)
	if bytes.Equal(escaped, plain) {
		t.Fatalf("no payload to escape in %s", plain)
	}
	return env, map[string][]byte{"plain": plain, "indented": indented, "reordered": reordered, "escaped": escaped}
}

// DecodeKnownEnvelope, and DecodeKnownEnvelopeAt over PayloadSpan, give
// what the strict decode gives for every layout (sameEnvelope); the span
// is the payload's string, and an escaped one is left to the whole decode.
// The known decode still refuses what Validate refuses but the payload's
// base64 (more signatures than MaxEnvelopeSigs, say).
func TestDecodeKnownEnvelope(t *testing.T) {
	env, layouts := knownEnvelopes(t)
	for name, data := range layouts {
		if _, err := ParseEnvelope(data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameEnvelope(t, data)
		start, end, _ := PayloadSpan(data)
		_, err := DecodeKnownEnvelopeAt(data, start, end)
		switch {
		case name == "escaped" && err == nil:
			t.Fatal("an escaped payload span decoded as plain")
		case name != "escaped" && string(data[start:end]) != `"`+env.Payload+`"`:
			t.Fatalf("%s: span %d..%d is %s", name, start, end, data[start:end])
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

// A span that is not the payload's is refused: off by one, overflowing,
// the whole envelope, or another plain string (a keyid) of it.
func TestDecodeKnownEnvelopeAt(t *testing.T) {
	_, layouts := knownEnvelopes(t)
	plain := layouts["plain"]
	start, end, _ := PayloadSpan(plain)
	key := bytes.Index(plain, []byte(`"keyid":"`)) + len(`"keyid":`)
	keyEnd := key + 1 + bytes.IndexByte(plain[key+1:], '"') + 1
	for _, span := range [][2]int{{start + 1, end}, {start, end - 1}, {0, len(plain)}, {-1, end}, {start, len(plain) + 1},
		{math.MaxInt - 6, math.MinInt}, {math.MaxInt, math.MaxInt}, {key, keyEnd}} {
		if got, err := DecodeKnownEnvelopeAt(plain, span[0], span[1]); err == nil {
			t.Fatalf("span %v of %d bytes decoded (payload %q)", span, len(plain), got.Payload)
		}
	}
}

// TestContractDigest: a known catalog's contract digest, asked for from
// several goroutines and again, is Digest of the contract, as a fully
// decoded catalog gives it; an unknown id is not found.
func TestContractDigest(t *testing.T) {
	c := validCatalog()
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
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, id := range full.ContractIDs() {
				ct, _ := full.Contract(id)
				want, err := Digest(ct)
				if err != nil {
					t.Error(err)
					return
				}
				for _, cat := range []*Catalog{full, known, known} {
					got, d, ok, err := cat.ContractDigest(id)
					if !ok || err != nil || d != want || !reflect.DeepEqual(got, ct) {
						t.Errorf("contract %s: %q, %v, %v; want %q", id, d, ok, err, want)
					}
				}
			}
		})
	}
	wg.Wait()
	if _, _, ok, _ := known.ContractDigest("absent"); ok {
		t.Error("an absent contract was found")
	}
}

// A contracts span that is not exactly the catalog's top-level contracts
// object is refused: off by a byte, one contract, a selector, the whole
// payload, or one that runs on over the selectors (whose rest would still
// be a catalog, without them); a contract whose id differs from its key is
// not given out.
func TestDecodeKnownCatalogAtForgedSpans(t *testing.T) {
	c := validCatalog()
	other := validContract()
	other.ID = "second"
	c.Contracts[other.ID] = other
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	s, e, ok := ContractsSpan(payload)
	if !ok {
		t.Fatal("no contracts span")
	}
	at, err := DecodeKnownCatalogAt(payload, s, e)
	if err != nil {
		t.Fatal(err)
	}
	if got := at.ContractIDs(); len(got) != 2 {
		t.Fatalf("ids %v", got)
	}
	sel := bytes.Index(payload, []byte(`"selectors":`)) + len(`"selectors":`)
	selEnd, _ := skipValue(payload, sel)
	if selEnd <= sel || sel < e {
		t.Fatalf("selectors at %d..%d, contracts end %d", sel, selEnd, e)
	}
	match := bytes.Index(payload[sel:], []byte(`"match":`)) + sel + len(`"match":`)
	matchEnd, _ := skipValue(payload, match)
	one := bytes.Index(payload[s:], []byte(`"second":`)) + s + len(`"second":`)
	oneEnd, _ := skipValue(payload, one)
	for name, span := range map[string][2]int{
		"start+1": {s + 1, e}, "end-1": {s, e - 1}, "end+1": {s, e + 1},
		"one contract": {one, oneEnd}, "a selector's match": {match, matchEnd}, "whole": {0, len(payload)},
		"over the selectors": {s, selEnd}, "reversed": {e, s}, "empty": {s, s},
	} {
		if got, err := DecodeKnownCatalogAt(payload, span[0], span[1]); err == nil {
			t.Errorf("%s %v: decoded, selectors %d, ids %v", name, span, len(got.Selectors), got.ContractIDs())
		}
	}

	// The key names another contract's id.
	swapped := bytes.Replace(payload, []byte(`"second":{"id":"second"`), []byte(`"second":{"id":"third"`), 1)
	for _, k := range []func() (*Catalog, error){
		func() (*Catalog, error) { return DecodeKnownCatalog(swapped) },
		func() (*Catalog, error) {
			s, e, _ := ContractsSpan(swapped)
			return DecodeKnownCatalogAt(swapped, s, e)
		},
	} {
		cat, err := k()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cat.Contract("second"); ok {
			t.Fatal("a contract whose id is not its key was given out")
		}
	}
}

// objectMembers splits an object whose strings hold brackets, quotes and
// escapes, and whose keys are escaped, as the JSON decoder reads it.
func TestObjectMembers(t *testing.T) {
	data := []byte(` {"a\u0062" : {"x":"}{][\"\\"} , "c":[1,{"d":"]"}],"e":"s\"}","f":-1.5e3 ,"g":null,"h":true}`)
	got, end, err := objectMembers(data, 1)
	if err != nil || end != len(data) {
		t.Fatalf("end %d of %d, %v", end, len(data), err)
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Errorf("member %q = %s, want %s", k, got[k], v)
		}
	}
	for _, bad := range []string{`{`, `{"a"}`, `{"a":}`, `{"a":1 "b":2}`, `{"a":"x`, `{"a":{"b":1}`, `{a:1}`, `{"a":1,}`} {
		if _, _, err := objectMembers([]byte(bad), 0); err == nil {
			t.Errorf("%s: split", bad)
		}
	}
}
