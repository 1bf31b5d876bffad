package spec

import (
	"embed"
	"fmt"
	"slices"
)

// schemaFS holds the JSON Schemas (draft 2020-12) of every document. They
// mirror the Go validation as far as JSON Schema can; where they differ, Go
// is stricter and is the authority (see testdata/corpus/*/invalid-go-only).
//
//go:embed schemas/*.json
var schemaFS embed.FS

// SchemaBaseURI is the prefix of every schema's $id; refs between schemas
// are relative ("contract.json#/$defs/id").
const SchemaBaseURI = "https://schemas.gensee.dev/v1/"

// SchemaNames lists the embedded schemas: contract, catalog, inference,
// observation, envelope, manifest, event, receipt.
func SchemaNames() []string {
	return []string{"contract", "catalog", "inference", "observation", "envelope", "manifest", "event", "receipt"}
}

// Schema returns the JSON Schema document called name (see SchemaNames).
func Schema(name string) ([]byte, error) {
	if !slices.Contains(SchemaNames(), name) {
		return nil, fmt.Errorf("schema %q: unknown; known: %v", name, SchemaNames())
	}
	b, err := schemaFS.ReadFile("schemas/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", name, err)
	}
	return b, nil
}
