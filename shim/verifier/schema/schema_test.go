package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const schema = `{
  "type": "object",
  "required": ["ok", "n"],
  "additionalProperties": false,
  "properties": {"ok": {"const": true}, "n": {"type": "integer", "minimum": 1}}
}`

func TestJudge(t *testing.T) {
	j, err := CompileJSONSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]string{
		`{"ok":true,"n":3}`:            "",
		`{"ok":false,"n":3}`:           "/ok",
		`{"ok":true}`:                  "missing property 'n'",
		`{"ok":true,"n":3,"x":1}`:      "additional",
		`{"ok":true,"n":3,"n":4}`:      "not strict JSON",
		`{"ok":true,"n":3} {}`:         "not strict JSON",
		"{\"ok\":true,\"n\":\"\xff\"}": "not strict JSON",
	} {
		problems := j.Judge([]byte(doc))
		switch {
		case want == "" && len(problems) != 0:
			t.Errorf("%s: %q, want a pass", doc, problems)
		case want != "" && (len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), want)):
			t.Errorf("%s: %q, want a problem with %q", doc, problems, want)
		}
	}
}

// TestCompileNoLoader: a schema never makes the verifier read a file or
// the network.
func TestCompileNoLoader(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(secret, []byte(`{"type":"string"}`), 0o600)
	for _, ref := range []string{"file://" + secret, "https://example.com/s.json"} {
		if _, err := CompileJSONSchema([]byte(`{"$ref": "` + ref + `"}`)); err == nil || !strings.Contains(err.Error(), "refer to nothing outside it") {
			t.Errorf("$ref %s: %v", ref, err)
		}
	}
	if _, err := CompileJSONSchema([]byte(`{"type": 5}`)); err == nil {
		t.Error("an invalid schema compiled")
	}
	if _, err := CompileJSONSchema([]byte(`{`)); err == nil {
		t.Error("a schema that is not JSON compiled")
	}
	// The draft's meta-schema is embedded, never fetched.
	if _, err := CompileJSONSchema([]byte(`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}`)); err != nil {
		t.Errorf("draft-07 schema: %v", err)
	}
}
