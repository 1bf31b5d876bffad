package contrib

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/service"
	"github.com/gensee/gensee/spec"
)

// TestContribOperatorConfig: the example operator config parses strictly
// and names the runtime's default paths.
func TestContribOperatorConfig(t *testing.T) {
	k := loadKit(t)
	c, err := config.Parse("gensee/config.toml", k.raw["gensee/config.toml"])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ key, got, want string }{
		{"catalog", c.Catalog, config.DefaultCatalog},
		{"trust_anchor", c.TrustAnchor, config.DefaultTrustAnchor},
		{"state_dir", c.StateDir, config.DefaultStateDir},
	} {
		if f.got != f.want {
			t.Errorf("%s = %q, want the default %q", f.key, f.got, f.want)
		}
	}
}

// exampleCatalogs parses contrib/catalogs/*.json.
func exampleCatalogs(t *testing.T, k *kit) map[string]*spec.Catalog {
	t.Helper()
	cats := map[string]*spec.Catalog{}
	for p, b := range k.json {
		if !strings.HasPrefix(p, "catalogs/") {
			continue
		}
		c, err := spec.ParseCatalog(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cats[p] = c
	}
	if len(cats) < 2 {
		t.Fatalf("want the CI and image-builder example catalogs, found %v", slices.Collect(maps.Keys(cats)))
	}
	return cats
}

// TestContribCatalogs: the example catalogs select CRI pods of one
// Kubernetes namespace each, on the gensee runtime, with a deny_all
// safe_default the pod sandbox (pause) container is admitted under; a node
// loads one catalog, so their union must be a valid catalog too.
func TestContribCatalogs(t *testing.T) {
	k := loadKit(t)
	cats := exampleCatalogs(t, k)
	seen := map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(cats)) {
		c := cats[p]
		for _, s := range c.Selectors {
			m := s.Match
			if m.ContainerdNamespace != service.CRINamespace || m.Runtime != service.RuntimeName || m.K8sNamespace == "" {
				t.Errorf("%s selector %s: match %+v, want containerd_namespace %s, runtime %s and a k8s_namespace",
					p, s.ID, m, service.CRINamespace, service.RuntimeName)
			}
			if other, dup := seen[m.K8sNamespace]; dup {
				t.Errorf("%s selector %s: k8s namespace %q is also selected in %s", p, s.ID, m.K8sNamespace, other)
			}
			seen[m.K8sNamespace] = p
			sd, ok := c.Contracts[s.SafeDefault]
			if !ok {
				t.Errorf("%s selector %s: no safe_default, so every pod's pause container would be refused", p, s.ID)
				continue
			}
			if sd.Network.Mode != spec.NetworkDenyAll || sd.Network.Loopback == spec.LoopbackAllow || len(sd.Products) > 0 {
				t.Errorf("%s selector %s: safe_default %s grants network or products; the pause container needs neither", p, s.ID, sd.ID)
			}
		}
	}
	if _, err := mergeCatalogs(cats); err != nil {
		t.Fatal(err)
	}
}

// mergeCatalogs is the union of the example catalogs, as one node would
// load them. Shared contract ids must carry identical contracts.
func mergeCatalogs(cats map[string]*spec.Catalog) (*spec.Catalog, error) {
	var out *spec.Catalog
	for _, p := range slices.Sorted(maps.Keys(cats)) {
		c := *cats[p]
		if out == nil {
			out = &c
			out.Contracts = maps.Clone(c.Contracts)
			continue
		}
		for id, ct := range c.Contracts {
			if prev, ok := out.Contracts[id]; ok && !reflect.DeepEqual(prev, ct) {
				return nil, fmt.Errorf("%s: contract %q differs from another example catalog's", p, id)
			}
			out.Contracts[id] = ct
		}
		out.Analyzers = append(slices.Clone(out.Analyzers), c.Analyzers...)
		out.Selectors = append(slices.Clone(out.Selectors), c.Selectors...)
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("union of the example catalogs: %w", err)
	}
	return out, nil
}

// TestContribContracts: a standalone contract under contracts/ is the same
// document as the contract of that id in every example catalog.
func TestContribContracts(t *testing.T) {
	k := loadKit(t)
	cats := exampleCatalogs(t, k)
	n := 0
	for p, b := range k.json {
		if !strings.HasPrefix(p, "contracts/") {
			continue
		}
		n++
		c, err := spec.ParseContract(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for cp, cat := range cats {
			if in, ok := cat.Contracts[c.ID]; ok && !reflect.DeepEqual(in, *c) {
				t.Errorf("%s differs from contract %q in %s", p, c.ID, cp)
			}
		}
	}
	if n == 0 {
		t.Fatal("no contract under contrib/contracts")
	}
}
