package trust

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"github.com/gensee/gensee/spec"
)

// memState is an in-memory StateStore for the fuzz target.
type memState struct {
	cur   State
	found bool
}

func (m *memState) Update(fn func(State, bool) (State, bool, error)) error {
	next, write, err := fn(m.cur, m.found)
	if err == nil && write {
		m.cur, m.found = next, true
	}
	return err
}

// FuzzAcceptCatalog: arbitrary envelope bytes never panic, and nothing is
// accepted (or recorded) unless the anchor signed exactly that payload.
func FuzzAcceptCatalog(f *testing.F) {
	fx := newCatFixture(f)
	for _, c := range []*spec.Catalog{catalogDoc(1, nil), catalogDoc(2, func(c *spec.Catalog) { c.Selectors[0].SafeDefault = "" })} {
		b, _ := json.Marshal(c)
		env, _ := spec.SignEnvelope(spec.PayloadTypeCatalog, b, fx.key)
		data, _ := json.Marshal(env)
		f.Add(data)
	}
	f.Add([]byte(`{"payloadType":"application/vnd.gensee.catalog.v1+json","payload":"e30=","signatures":[{"keyid":"","sig":""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st := &memState{}
		l, _, err := acceptCatalog("/fuzz/catalog.json", data, fx.anchor, st, now)
		if err != nil {
			if l != nil || st.found {
				t.Fatalf("refused (%v) yet returned %v / recorded %+v", err, l, st.cur)
			}
			return
		}
		env, perr := spec.ParseEnvelope(data)
		if perr != nil {
			t.Fatalf("accepted an unparseable envelope: %v", perr)
		}
		if _, verr := env.Verify(spec.PayloadTypeCatalog, []ed25519.PublicKey{fx.anchor}, 1); verr != nil {
			t.Fatalf("accepted a catalog the anchor did not sign: %v", verr)
		}
		if !st.found || st.cur.Version != l.Version {
			t.Fatalf("accepted version %d but recorded %+v", l.Version, st.cur)
		}
	})
}
