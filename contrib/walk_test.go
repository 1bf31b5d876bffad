package contrib

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"

	"github.com/gensee/gensee/spec"
)

// kit is every parsed file under contrib/, by slash path relative to it.
type kit struct {
	yaml map[string][]map[string]any // documents of each YAML file
	toml map[string]map[string]any
	json map[string][]byte
	raw  map[string][]byte
}

// loadKit walks contrib/ and parses every YAML, TOML and JSON file; a file
// that does not parse fails the test.
func loadKit(t *testing.T) *kit {
	t.Helper()
	k := &kit{yaml: map[string][]map[string]any{}, toml: map[string]map[string]any{}, json: map[string][]byte{}, raw: map[string][]byte{}}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		p = filepath.ToSlash(p)
		k.raw[p] = b
		switch filepath.Ext(p) {
		case ".yaml", ".yml":
			docs, err := parseYAML(b)
			if err != nil {
				t.Errorf("%s: %v", p, err)
			}
			k.yaml[p] = docs
		case ".toml":
			var m map[string]any
			if err := toml.Unmarshal(b, &m); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			k.toml[p] = m
		case ".json":
			if err := checkJSON(b); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			k.json[p] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// parseYAML decodes every document of a YAML stream; duplicate keys are
// errors (yaml.v3 refuses them).
func parseYAML(b []byte) ([]map[string]any, error) {
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// checkJSON recognises a gensee document by its shape and parses it with
// the runtime's own strict parser; any other JSON is refused, so a new
// example cannot go unchecked.
func checkJSON(b []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	var schema string
	json.Unmarshal(probe["schema"], &schema)
	var err error
	switch {
	case schema == spec.SchemaCatalog:
		_, err = spec.ParseCatalog(b)
	case schema == spec.SchemaInference:
		_, err = spec.ParseInference(b)
	case schema == spec.SchemaObservation:
		_, err = spec.ParseObservation(b)
	case probe["payloadType"] != nil:
		_, err = spec.ParseEnvelope(b)
	case probe["network"] != nil && probe["id"] != nil:
		_, err = spec.ParseContract(b)
	case probe["hook"] != nil && probe["stages"] != nil:
		err = checkOCIHook(b)
	default:
		return errors.New("not a gensee document (catalog, contract, inference, observation or envelope): no check applies")
	}
	return err
}

// checkOCIHook checks an oci-hooks(5) 1.0.0 document strictly: known
// fields only, an absolute hook path, known stages.
func checkOCIHook(b []byte) error {
	var h struct {
		Version string `json:"version"`
		Hook    struct {
			Path    string   `json:"path"`
			Args    []string `json:"args"`
			Env     []string `json:"env"`
			Timeout *int     `json:"timeout"`
		} `json:"hook"`
		When struct {
			Always        *bool             `json:"always"`
			Annotations   map[string]string `json:"annotations"`
			Commands      []string          `json:"commands"`
			HasBindMounts *bool             `json:"hasBindMounts"`
		} `json:"when"`
		Stages []string `json:"stages"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("oci-hooks document: %w", err)
	}
	if h.Version != "1.0.0" || !filepath.IsAbs(h.Hook.Path) || len(h.Stages) == 0 {
		return fmt.Errorf("oci-hooks document: version %q, hook.path %q, stages %v: want 1.0.0, an absolute path and stages", h.Version, h.Hook.Path, h.Stages)
	}
	for _, st := range h.Stages {
		if !slices.Contains([]string{"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"}, st) {
			return fmt.Errorf("oci-hooks document: stage %q is not an OCI hook stage", st)
		}
	}
	return nil
}

// objects returns every Kubernetes object of the kit by "Kind/namespace/name".
func (k *kit) objects(t *testing.T) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	for p, docs := range k.yaml {
		if !strings.HasPrefix(p, "kubernetes/") {
			continue
		}
		for _, d := range docs {
			key := str(d, "kind") + "/" + str(d, "metadata", "namespace") + "/" + str(d, "metadata", "name")
			if str(d, "apiVersion") == "" || str(d, "kind") == "" || str(d, "metadata", "name") == "" {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", p)
			}
			if _, dup := objs[key]; dup {
				t.Errorf("%s: %s defined twice", p, key)
			}
			objs[key] = d
		}
	}
	return objs
}

// TestContribParses: every YAML, TOML and JSON file under contrib/ parses,
// JSON with the runtime's strict parsers; the kit's files are all there.
func TestContribParses(t *testing.T) {
	k := loadKit(t)
	for _, p := range []string{
		"containerd/gensee-runtime.toml", "gensee/config.toml", "systemd/containerd.service.d/10-gensee.conf",
		"systemd/gensee-verify.service", "systemd/gensee-verify.timer", "systemd/gensee-analyzer.service",
		"catalogs/ci.catalog.json", "catalogs/image-builder.catalog.json", "contracts/pod-sandbox-deny.json",
		"kubernetes/runtimeclass.yaml", "kubernetes/install/namespace.yaml", "kubernetes/install/configmap.yaml",
		"kubernetes/install/catalog.yaml", "kubernetes/install/secret.yaml", "kubernetes/install/daemonset.yaml", "kubernetes/analyzer/daemonset.yaml",
		"systemd/gensee-node.service", "kubernetes/node/daemonset.yaml", "kubernetes/node/rbac.yaml",
	} {
		if _, ok := k.raw[p]; !ok {
			t.Errorf("contrib/%s is missing", p)
		}
	}
	if len(k.yaml) == 0 || len(k.toml) == 0 || len(k.json) == 0 {
		t.Fatalf("walk found %d YAML, %d TOML, %d JSON files", len(k.yaml), len(k.toml), len(k.json))
	}
}

// str walks nested maps by keys and returns the string there ("" if absent).
func str(m map[string]any, path ...string) string {
	s, _ := at(m, path...).(string)
	return s
}

// at walks nested maps by keys.
func at(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// list returns the value at path as a list of maps.
func list(m map[string]any, path ...string) []map[string]any {
	l, _ := at(m, path...).([]any)
	var out []map[string]any
	for _, v := range l {
		if mm, ok := v.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}
