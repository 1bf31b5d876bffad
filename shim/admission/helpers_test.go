package admission

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/gensee/gensee/spec"
)

// clone copies the catalog deeply enough for the mutations below.
func clone(c *spec.Catalog) *spec.Catalog {
	n := *c
	n.Contracts = maps.Clone(c.Contracts)
	n.Selectors = slices.Clone(c.Selectors)
	for i := range n.Selectors {
		n.Selectors[i].Routes = maps.Clone(n.Selectors[i].Routes)
	}
	n.Analyzers = slices.Clone(c.Analyzers)
	return &n
}

func withoutSelector(c *spec.Catalog, id string) *spec.Catalog {
	n := clone(c)
	n.Selectors = slices.DeleteFunc(n.Selectors, func(s spec.Selector) bool { return s.ID == id })
	return n
}

func withRoute(c *spec.Catalog, sel, class, contract string) *spec.Catalog {
	n := clone(c)
	for i := range n.Selectors {
		if n.Selectors[i].ID == sel {
			n.Selectors[i].Routes[class] = contract
		}
	}
	return n
}

// swapPayload keeps env's signatures but replaces its payload.
func swapPayload(t testing.TB, envJSON []byte, payload any) []byte {
	t.Helper()
	var env spec.Envelope
	if err := json.Unmarshal(envJSON, &env); err != nil {
		t.Fatal(err)
	}
	env.Payload = base64.StdEncoding.EncodeToString(mustJSON(t, payload))
	return mustJSON(t, env)
}
