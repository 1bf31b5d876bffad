package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

// TestContribParses parses every JSON example in contrib/boundary with the
// parser its "schema" names (none: a contract) and checks the catalog
// carries the standalone contracts unchanged.
func TestContribParses(t *testing.T) {
	dir := contrib(t, "")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) < 4 {
		t.Fatalf("contrib/boundary has %d JSON files (%v), want at least 4", len(files), err)
	}
	contracts := map[string]*spec.Contract{}
	var catalog *spec.Catalog
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data := readFile(t, f)
			var head struct {
				Schema string `json:"schema"`
			}
			if err := json.Unmarshal(data, &head); err != nil {
				t.Fatal(err)
			}
			switch head.Schema {
			case spec.SchemaCatalog:
				c, err := spec.ParseCatalog(data)
				if err != nil {
					t.Fatal(err)
				}
				catalog = c
			case spec.SchemaInference:
				if _, err := spec.ParseInference(data); err != nil {
					t.Fatal(err)
				}
			case spec.SchemaObservation:
				if _, err := spec.ParseObservation(data); err != nil {
					t.Fatal(err)
				}
			case "":
				c, err := spec.ParseContract(data)
				if err != nil {
					t.Fatal(err)
				}
				if want := strings.TrimSuffix(filepath.Base(f), ".json"); c.ID != want {
					t.Errorf("contract id %q, want the file name %q", c.ID, want)
				}
				contracts[c.ID] = c
			default:
				t.Fatalf("unknown schema %q", head.Schema)
			}
		})
	}
	if catalog == nil {
		t.Fatal("no catalog example")
	}
	for id, c := range contracts {
		if got, ok := catalog.Contracts[id]; !ok || !reflect.DeepEqual(got, *c) {
			t.Errorf("catalog.json contracts[%q] differs from %s.json", id, id)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Error(err)
	}
}
