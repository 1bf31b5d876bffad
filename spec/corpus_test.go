package spec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// corpusParsers maps each corpus directory to its Go parser.
func corpusParsers() map[string]func([]byte) error {
	return map[string]func([]byte) error{
		"contract":    func(b []byte) error { _, err := ParseContract(b); return err },
		"catalog":     func(b []byte) error { _, err := ParseCatalog(b); return err },
		"inference":   func(b []byte) error { _, err := ParseInference(b); return err },
		"observation": func(b []byte) error { _, err := ParseObservation(b); return err },
		"envelope":    func(b []byte) error { _, err := ParseEnvelope(b); return err },
		"manifest":    func(b []byte) error { _, err := ParseManifest(b); return err },
		"event":       func(b []byte) error { _, err := ParseEvent(b); return err },
		"receipt":     func(b []byte) error { _, err := ParseReceipt(b); return err },
	}
}

// compileSchemas compiles every embedded schema with format assertions on.
func compileSchemas(t testing.TB) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	for _, name := range SchemaNames() {
		b, err := Schema(name)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		if err := c.AddResource(SchemaBaseURI+name+".json", doc); err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range SchemaNames() {
		s, err := c.Compile(SchemaBaseURI + name + ".json")
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		out[name] = s
	}
	return out
}

// schemaAccepts reports whether data is one JSON value the schema accepts.
func schemaAccepts(s *jsonschema.Schema, data []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// TestCorpusSchemaAndGoAgree: for every corpus file, the JSON Schema and
// the Go parser agree. valid/: both accept. invalid/: both reject.
// invalid-go-only/: Go rejects while the schema accepts (a rule JSON Schema
// cannot express); if the schema rejects too, the file belongs in invalid/.
func TestCorpusSchemaAndGoAgree(t *testing.T) {
	schemas := compileSchemas(t)
	for doc, parse := range corpusParsers() {
		for _, kind := range []string{"valid", "invalid", "invalid-go-only"} {
			files, _ := filepath.Glob(filepath.Join("testdata", "corpus", doc, kind, "*.json"))
			if len(files) == 0 {
				t.Errorf("corpus %s/%s is empty", doc, kind)
			}
			for _, f := range files {
				t.Run(doc+"/"+kind+"/"+filepath.Base(f), func(t *testing.T) {
					data, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					goErr, schemaErr := parse(data), schemaAccepts(schemas[doc], data)
					switch kind {
					case "valid":
						if goErr != nil || schemaErr != nil {
							t.Errorf("want both to accept:\ngo: %v\nschema: %v", goErr, schemaErr)
						}
					case "invalid":
						if goErr == nil || schemaErr == nil {
							t.Errorf("want both to reject:\ngo: %v\nschema: %v", goErr, schemaErr)
						}
					case "invalid-go-only":
						if goErr == nil || schemaErr != nil {
							t.Errorf("want go to reject and the schema to accept:\ngo: %v\nschema: %v", goErr, schemaErr)
						}
					}
				})
			}
		}
	}
}

// TestSchemasAreStrict: every object schema closes its properties.
func TestSchemasAreStrict(t *testing.T) {
	for _, name := range SchemaNames() {
		b, _ := Schema(name)
		var doc any
		if err := DecodeStrict(b, &doc, 1<<20); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		walkSchema(t, name, doc)
	}
	if _, err := Schema("nope"); err == nil {
		t.Fatal("unknown schema name accepted")
	}
}

func walkSchema(t *testing.T, at string, v any) {
	switch v := v.(type) {
	case map[string]any:
		if v["type"] == "object" && v["additionalProperties"] == nil {
			t.Errorf("%s: object schema without additionalProperties", at)
		}
		for k, e := range v {
			walkSchema(t, at+"/"+k, e)
		}
	case []any:
		for _, e := range v {
			walkSchema(t, at+"/[]", e)
		}
	}
}
