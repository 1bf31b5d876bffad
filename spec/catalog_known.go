package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	if err := DecodeChecked(raw, &ct); err != nil || ct.ID != id {
		// These bytes decoded as part of the whole payload under this
		// build (ParseCatalog), which holds each contract's id equal to
		// its key: not reached unless that no longer holds.
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
	start, end, ok = topLevelSpan(data, "payload")
	if !ok || data[start] != '"' {
		return 0, 0, false
	}
	return start, end, true
}

// topLevelSpan is where the value of the first top-level member named key
// lies in data, a JSON object, found by a token walk of that object (each
// other member's value decoded as raw bytes); ok is false for anything
// else.
func topLevelSpan(data []byte, key string) (start, end int, ok bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, false
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return 0, 0, false
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return 0, 0, false
		}
		if k == key {
			end = int(d.InputOffset())
			return end - len(raw), end, len(raw) > 0
		}
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

// ContractsSpan is where a catalog payload's top-level "contracts" object
// lies in it, braces included, found by a token walk of the top-level
// object; ok is false for anything else. The trust package keeps it with
// its accepted mark (beside the envelope's PayloadSpan) so that the next
// decode of the same bytes finds each contract by matching its brackets
// instead of scanning its characters as JSON (DecodeKnownCatalogAt).
func ContractsSpan(payload []byte) (start, end int, ok bool) {
	start, end, ok = topLevelSpan(payload, "contracts")
	if !ok || end-start < 2 || payload[start] != '{' {
		return 0, 0, false
	}
	return start, end, true
}

// DecodeKnownCatalogAt is DecodeKnownCatalog for a payload whose contracts
// object lies at payload[start:end] (ContractsSpan of the same bytes): the
// rest of the payload, with an empty object in the contracts' place, is
// decoded as DecodeKnownCatalog decodes the whole, and the contracts are
// the object's members, found by matching brackets (objectMembers), each
// decoded when Contract asks for it. A span that is not the payload's
// top-level contracts object, exactly, is an error (the caller decodes
// the whole).
func DecodeKnownCatalogAt(payload []byte, start, end int) (*Catalog, error) {
	if start < 0 || start >= len(payload) || end > len(payload) || end < start+2 || payload[start] != '{' {
		return nil, errors.New("decode catalog: the contracts span is not an object")
	}
	raw, objEnd, err := objectMembers(payload, start)
	if err != nil {
		return nil, fmt.Errorf("decode catalog: contracts: %w", err)
	}
	if objEnd != end {
		return nil, errors.New("decode catalog: the contracts span is not the whole object")
	}
	rest := make([]byte, 0, len(payload)-(end-start)+2)
	rest = append(append(append(rest, payload[:start]...), `{}`...), payload[end:]...)
	// The object must be the top-level contracts: in the rest, they are
	// the empty object put in its place (the rest is a few kilobytes).
	if s, e, ok := ContractsSpan(rest); !ok || s != start || e != start+2 {
		return nil, errors.New("decode catalog: the contracts span is not the catalog's contracts")
	}
	var k knownCatalog
	if err := DecodeChecked(rest, &k); err != nil {
		return nil, err
	}
	if len(k.Contracts) != 0 {
		return nil, errors.New("decode catalog: contracts outside the contracts span")
	}
	return &Catalog{Schema: k.Schema, Version: k.Version, IssuedAt: k.IssuedAt, ExpiresAt: k.ExpiresAt,
		Analyzers: k.Analyzers, Selectors: k.Selectors, Verifiers: k.Verifiers, known: &knownContracts{raw: raw, decoded: map[string]Contract{}}}, nil
}

// objectMembers splits the JSON object that starts at data[start] into its
// members (each key, unquoted, to its value's bytes) and returns them with
// the offset just past the object. It checks the structure it walks (a
// string key, a colon and a value per member, commas between) and skips
// each value by matching its brackets and strings (skipValue), without
// checking the value's inside: a contract's bytes are decoded strictly
// when Contract asks for them. Meant for bytes that passed a strict
// decode before; a later key replaces an earlier one, as a Go map decode
// does.
func objectMembers(data []byte, start int) (map[string]json.RawMessage, int, error) {
	members := map[string]json.RawMessage{}
	i := skipSpace(data, start+1)
	if i < len(data) && data[i] == '}' {
		return members, i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, 0, errors.New("want a member's key")
		}
		keyEnd, ok := skipString(data, i)
		if !ok {
			return nil, 0, errors.New("unterminated key")
		}
		var key string
		if err := json.Unmarshal(data[i:keyEnd], &key); err != nil {
			return nil, 0, err
		}
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return nil, 0, errors.New("want a colon after a key")
		}
		i = skipSpace(data, i+1)
		valueEnd, ok := skipValue(data, i)
		if !ok {
			return nil, 0, errors.New("unterminated value")
		}
		members[key] = data[i:valueEnd:valueEnd]
		i = skipSpace(data, valueEnd)
		if i >= len(data) {
			return nil, 0, errors.New("unterminated object")
		}
		switch data[i] {
		case '}':
			return members, i + 1, nil
		case ',':
			i = skipSpace(data, i+1)
		default:
			return nil, 0, errors.New("want a comma or the object's end")
		}
	}
}

// skipValue returns the offset just past the JSON value at data[i]: a
// string to its closing quote, an object or array to its matching bracket
// (strings inside skipped whole), anything else (a number, true, false,
// null) to the next delimiter.
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, ok := skipString(data, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	default:
		j := i
	literal:
		for ; j < len(data); j++ {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				break literal
			}
		}
		return j, j > i
	}
}

// skipString returns the offset just past the JSON string whose opening
// quote is data[i].
func skipString(data []byte, i int) (int, bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// skipSpace returns the offset of the first byte at or after i that is
// not JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}
