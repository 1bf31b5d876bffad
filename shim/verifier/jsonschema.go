package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gensee/gensee/shim/gate"
)

// ErrStagedMismatch: a staged copy no longer hashes to its manifest record.
var ErrStagedMismatch = errors.New("the staged copy does not match the manifest")

// schemaURL is where a schema given as bytes is registered; it is never
// fetched.
const schemaURL = "urn:gensee:verifier:schema"

// noLoader refuses every URL a schema refers to: a verifier running as
// root never reads a file or the network because a schema says so.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: schemas are read from --schema only; refer to nothing outside it", url)
}

// JSONSchema is a compiled JSON Schema and the digest of its bytes.
type JSONSchema struct {
	schema *jsonschema.Schema
	// Digest is "sha256:<hex>" of the schema's bytes: the receipt's
	// criteria_digest.
	Digest string
}

// CompileJSONSchema compiles a JSON Schema document (draft 2020-12 unless
// it names another with $schema), with formats asserted and no loader.
func CompileJSONSchema(doc []byte) (*JSONSchema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("parse JSON Schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, v); err != nil {
		return nil, fmt.Errorf("load JSON Schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile JSON Schema: %w", err)
	}
	sum := sha256.Sum256(doc)
	return &JSONSchema{schema: s, Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// Judge validates doc against the schema: no problem is a pass. A
// document that is not strict JSON (one value, valid UTF-8, no repeated
// key: what the gate requires of a structured_result) fails too, since
// its readers could each see another document.
func (j *JSONSchema) Judge(doc []byte) []string {
	if v := gate.CheckJSON(bytes.NewReader(doc)); v != nil {
		return []string{"not strict JSON: " + v.Detail}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	err = j.schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		loc := u.InstanceLocation
		if loc == "" {
			loc = "(document)"
		}
		out = append(out, loc+": "+u.Error.String())
	}
	if len(out) == 0 {
		out = []string{strings.TrimSpace(err.Error())}
	}
	return out
}
