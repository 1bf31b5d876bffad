package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
)

// DecodeKnownCatalog decodes a catalog payload that this build already
// decoded strictly and validated (ParseCatalog) with exactly these bytes,
// decoding each contract only when Contract asks for it: a task's Create
// needs one or two contracts of the catalog, and a catalog of a thousand
// allow tuples costs about 4 ms to decode whole on the 2-vCPU VMs. The
// contracts' JSON is kept as the payload's own bytes; Contracts stays nil,
// so such a catalog is read through Contract and ContractIDs. Call it only
// on a payload whose envelope verified and whose bytes passed ParseCatalog
// (the trust package's accepted mark says so).
func DecodeKnownCatalog(payload []byte) (*Catalog, error) {
	var k knownCatalog
	if err := DecodeChecked(payload, &k); err != nil {
		return nil, err
	}
	return &Catalog{Schema: k.Schema, Version: k.Version, IssuedAt: k.IssuedAt, ExpiresAt: k.ExpiresAt,
		Analyzers: k.Analyzers, Selectors: k.Selectors, Verifiers: k.Verifiers, known: &knownContracts{raw: k.Contracts, decoded: map[string]Contract{}}}, nil
}

// knownCatalog is Catalog with its contracts left as JSON; its fields are
// Catalog's (TestKnownCatalogFields).
type knownCatalog struct {
	Schema    string                     `json:"schema"`
	Version   uint64                     `json:"version"`
	IssuedAt  time.Time                  `json:"issued_at"`
	ExpiresAt time.Time                  `json:"expires_at"`
	Contracts map[string]json.RawMessage `json:"contracts"`
	Analyzers []Analyzer                 `json:"analyzers,omitempty"`
	Selectors []Selector                 `json:"selectors"`
	Verifiers []Verifier                 `json:"verifiers,omitempty"`
}

// knownContracts are a DecodeKnownCatalog catalog's contracts: their JSON,
// and those decoded so far.
type knownContracts struct {
	mu      sync.Mutex
	raw     map[string]json.RawMessage
	decoded map[string]Contract
	digests map[string]string // Digest of each decoded contract asked for; guarded by mu
}

// Contract is the catalog's contract id, and whether it has one.
func (c *Catalog) Contract(id string) (Contract, bool) {
	if c.known == nil {
		ct, ok := c.Contracts[id]
		return ct, ok
	}
	k := c.known
	k.mu.Lock()
	defer k.mu.Unlock()
	if ct, ok := k.decoded[id]; ok {
		return ct, true
	}
	raw, ok := k.raw[id]
	if !ok {
		return Contract{}, false
	}
	var ct Contract
	if err := DecodeChecked(raw, &ct); err != nil {
		// These bytes decoded as part of the whole payload under this
		// build (ParseCatalog): not reached unless that no longer holds.
		return Contract{}, false
	}
	k.decoded[id] = ct
	return ct, true
}

// ContractDigest is the catalog's contract id with its digest (Digest),
// and whether it has one. A DecodeKnownCatalog catalog digests each
// contract once: a Create decides twice (before and after the
// executable's hash), and the canonical form of a contract of a thousand
// allow tuples costs milliseconds.
func (c *Catalog) ContractDigest(id string) (Contract, string, bool, error) {
	ct, ok := c.Contract(id)
	if !ok {
		return Contract{}, "", false, nil
	}
	k := c.known
	if k == nil {
		d, err := Digest(ct)
		return ct, d, true, err
	}
	k.mu.Lock()
	d, done := k.digests[id]
	k.mu.Unlock()
	if done {
		return ct, d, true, nil
	}
	d, err := Digest(ct)
	if err != nil {
		return ct, "", true, err
	}
	k.mu.Lock()
	if k.digests == nil {
		k.digests = map[string]string{}
	}
	k.digests[id] = d
	k.mu.Unlock()
	return ct, d, true, nil
}

// ContractIDs are the ids of the catalog's contracts, sorted.
func (c *Catalog) ContractIDs() []string {
	if c.known == nil {
		return slices.Sorted(maps.Keys(c.Contracts))
	}
	return slices.Sorted(maps.Keys(c.known.raw))
}

// DecodeKnownEnvelope decodes an envelope whose bytes passed the strict
// decode before (DecodeChecked's settings), with its payload taken as the
// JSON string's bytes when they hold no escape (a JSON string without a
// backslash is exactly its bytes): a catalog's payload is most of its
// file, and unquoting it cost a third of the decode. It runs Validate's
// checks but the payload's base64, which DecodePayload decodes as
// strictly.
func DecodeKnownEnvelope(data []byte) (*Envelope, error) {
	var k struct {
		PayloadType string          `json:"payloadType"`
		Payload     json.RawMessage `json:"payload"`
		Signatures  []Signature     `json:"signatures"`
	}
	if err := DecodeChecked(data, &k); err != nil {
		return nil, err
	}
	env := &Envelope{PayloadType: k.PayloadType, Signatures: k.Signatures}
	if n := len(k.Payload); n >= 2 && k.Payload[0] == '"' && k.Payload[n-1] == '"' && bytes.IndexByte(k.Payload, '\\') < 0 {
		env.Payload = string(k.Payload[1 : n-1])
	} else if err := json.Unmarshal(k.Payload, &env.Payload); err != nil {
		return nil, err
	}
	if err := env.validate(false); err != nil {
		return nil, err
	}
	return env, nil
}

// PayloadSpan is where an envelope's payload JSON string lies in data,
// quotes included, found by a token walk of the top-level object; ok is
// false for anything else. The trust package keeps it with its accepted
// mark so that the next decode of the same bytes need not scan the
// payload's characters as JSON (DecodeKnownEnvelopeAt).
func PayloadSpan(data []byte) (start, end int, ok bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, false
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return 0, 0, false
		}
		after := int(d.InputOffset()) // just past the key
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return 0, 0, false
		}
		if k != "payload" {
			continue
		}
		end = int(d.InputOffset())
		start = bytes.IndexByte(data[after:end], '"')
		if start < 0 {
			return 0, 0, false
		}
		return after + start, end, true
	}
	return 0, 0, false
}

// DecodeKnownEnvelopeAt is DecodeKnownEnvelope for data whose payload JSON
// string lies at data[start:end] (PayloadSpan of the same bytes): the rest
// of the envelope, with an empty payload in its place, is decoded and
// checked, and the payload is the span's bytes. A span that is not a JSON
// string without escapes is an error (the caller decodes the whole).
func DecodeKnownEnvelopeAt(data []byte, start, end int) (*Envelope, error) {
	// start is bounded first, so start+2 cannot overflow.
	if start < 0 || start > len(data) || end > len(data) || end < start+2 || data[start] != '"' || data[end-1] != '"' ||
		bytes.IndexByte(data[start+1:end-1], '"') >= 0 || bytes.IndexByte(data[start:end], '\\') >= 0 {
		return nil, errors.New("decode envelope: the payload span is not a plain JSON string")
	}
	rest := make([]byte, 0, len(data)-(end-start)+2)
	rest = append(append(append(rest, data[:start]...), `""`...), data[end:]...)
	// The span must be the top-level payload's: in the rest, the payload
	// is the empty string put in its place (a few hundred bytes to walk).
	if s, e, ok := PayloadSpan(rest); !ok || s != start || e != start+2 {
		return nil, errors.New("decode envelope: the payload span is not the envelope's payload")
	}
	var env Envelope
	if err := DecodeChecked(rest, &env); err != nil {
		return nil, err
	}
	env.Payload = string(data[start+1 : end-1])
	if err := env.validate(false); err != nil {
		return nil, err
	}
	return &env, nil
}
