// Package schema is the JSON Schema judge of gensee verify json-schema:
// it compiles a JSON Schema with every URL loader disabled (only the
// schema given and the draft meta-schemas the library embeds are ever
// read) and judges a document against it.
//
// It is the only package that links github.com/santhosh-tekuri/jsonschema,
// whose initialisation compiles the meta-schemas: it runs in the small
// binary gensee-verifier (cmd/gensee-verifier), a child of gensee verify
// json-schema that speaks the judge protocol of package verifier (Serve),
// so no other gensee command pays that start-up, and the parser of a
// workload's product runs without the CLI's privileges.
package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/verifier"
)

// schemaURL is where a schema given as bytes is registered; it is never
// fetched.
const schemaURL = "urn:gensee:verifier:schema"

// noLoader refuses every URL a schema refers to: a verifier never reads a
// file or the network because a schema says so.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: schemas are read from --schema only; refer to nothing outside it", url)
}

// JSONSchema is a compiled JSON Schema.
type JSONSchema struct {
	schema *jsonschema.Schema
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
	return &JSONSchema{schema: s}, nil
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
	// The library reports a schema's properties in map order: sorted, the
	// same document gets the same answer (and receipt) every time.
	slices.Sort(out)
	return out
}

// Judge judges doc against the JSON Schema schema: the problems (none: a
// pass), or the error that the schema does not compile.
func Judge(schema, doc []byte) ([]string, error) {
	s, err := CompileJSONSchema(schema)
	if err != nil {
		return nil, err
	}
	return s.Judge(doc), nil
}

// Serve answers one request of the judge protocol (verifier.JudgeRequest)
// read from r with its answer written to w (verifier.JudgeAnswer): the
// problems, or the schema's error. A request that is not one, or an
// answer that cannot be written, is its error, and nothing is written.
func Serve(r io.Reader, w io.Writer) error {
	schema, doc, err := verifier.ReadJudgeRequest(r)
	if err != nil {
		return err
	}
	answer, err := verifier.JudgeAnswer(Judge(schema, doc))
	if err != nil {
		return err
	}
	if _, err := w.Write(answer); err != nil {
		return fmt.Errorf("write the answer: %w", err)
	}
	return nil
}
