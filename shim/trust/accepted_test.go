package trust

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/gensee/gensee/internal/version"
	"github.com/gensee/gensee/spec"
)

func withBuild(t *testing.T, v string) {
	saved := version.Version
	version.Version = v
	t.Cleanup(func() { version.Version = saved })
}

// A catalog file accepted in full is marked; the next load of the same
// bytes by the same build takes the short path to the same result, still
// under the window and the high-water mark.
func TestLoadCatalogAcceptedMark(t *testing.T) {
	withBuild(t, "test-build")
	fx := newCatFixture(t)
	path, _ := fx.catalog(t, "c.json", 3, nil)
	first, err := LoadCatalog(path, fx.anchor, fx.state, now)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !marked(fx.state, fileDigest(data)) {
		t.Fatal("no mark after a full accept")
	}
	if sp, _ := fx.state.accepted(fileDigest(data)); sp.payload == ([2]int{}) || sp.contracts == ([2]int{}) {
		t.Fatalf("the mark notes no payload or contracts span: %+v", sp)
	}
	again, err := LoadCatalog(path, fx.anchor, fx.state, now)
	if err != nil {
		t.Fatal(err)
	}
	// The same catalog, its contracts decoded as asked for.
	if first.Digest != again.Digest || first.Version != again.Version || again.Catalog.Contracts != nil ||
		!reflect.DeepEqual(first.Catalog.Selectors, again.Catalog.Selectors) || !reflect.DeepEqual(first.Catalog.Analyzers, again.Catalog.Analyzers) ||
		!first.Catalog.ExpiresAt.Equal(again.Catalog.ExpiresAt) || !slices.Equal(first.Catalog.ContractIDs(), again.Catalog.ContractIDs()) {
		t.Fatalf("the marked load differs:\n%+v\n%+v", first.Catalog, again.Catalog)
	}
	for _, id := range first.Catalog.ContractIDs() {
		want, _ := first.Catalog.Contract(id)
		if got, ok := again.Catalog.Contract(id); !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("contract %s of the marked load: %+v, want %+v", id, got, want)
		}
	}
	// The window still holds on the short path.
	_, err = LoadCatalog(path, fx.anchor, fx.state, now.Add(48*60*60*1e9))
	expectCatalogRule(t, nil, err, path, RuleExpired)
	// Another build does not trust the mark; nor does a dev build.
	withBuild(t, "other-build")
	if marked(fx.state, fileDigest(data)) {
		t.Fatal("another build's mark was trusted")
	}
	withBuild(t, "dev")
	if marked(fx.state, fileDigest(data)) {
		t.Fatal("a dev build trusted a mark")
	}
}

// The mark only skips what the same bytes passed: a file signed by another
// key, with the mark forged for its bytes, is still refused by signature;
// a mark in a group-writable file is not read.
func TestLoadCatalogMarkForged(t *testing.T) {
	withBuild(t, "test-build")
	fx := newCatFixture(t)
	other := newCatFixture(t)
	path, _ := fx.write(t, "forged.json", catalogDoc(4, nil), spec.PayloadTypeCatalog, other.key)
	data, _ := os.ReadFile(path)
	fx.state.markAccepted(fileDigest(data), spans{})
	if !marked(fx.state, fileDigest(data)) {
		t.Fatal("mark not written")
	}
	l, err := LoadCatalog(path, fx.anchor, fx.state, now)
	expectCatalogRule(t, l, err, path, RuleSignature)

	good, _ := fx.catalog(t, "good.json", 5, nil)
	if _, err := LoadCatalog(good, fx.anchor, fx.state, now); err != nil {
		t.Fatal(err)
	}
	gdata, _ := os.ReadFile(good)
	mark := fx.state.Path + acceptedSuffix
	if err := os.Chmod(mark, 0o666); err != nil {
		t.Fatal(err)
	}
	if marked(fx.state, fileDigest(gdata)) {
		t.Fatal("a group/other-writable mark was trusted")
	}
}

// A forged mark does not let an envelope past the envelope's checks: one
// of more signatures than spec.MaxEnvelopeSigs, every one of them the
// anchor's, is refused on the short path as on the full one (a file of
// thousands would cost every Create its verification).
func TestLoadCatalogMarkForgedSignatureFlood(t *testing.T) {
	withBuild(t, "test-build")
	fx := newCatFixture(t)
	b, err := json.Marshal(catalogDoc(3, nil))
	if err != nil {
		t.Fatal(err)
	}
	env, err := spec.SignEnvelope(spec.PayloadTypeCatalog, b, fx.key)
	if err != nil {
		t.Fatal(err)
	}
	for len(env.Signatures) <= spec.MaxEnvelopeSigs {
		env.Signatures = append(env.Signatures, env.Signatures[0])
	}
	data, _ := json.Marshal(env)
	path := filepath.Join(fx.dir, "flood.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fx.state.markAccepted(fileDigest(data), spans{})
	if _, err := LoadCatalog(path, fx.anchor, fx.state, now); err == nil {
		t.Fatalf("an envelope of %d signatures was accepted under a forged mark", len(env.Signatures))
	}
}

// marked reports whether the state's mark names this file and build.
func marked(s *FileState, fileSHA256 string) bool {
	_, ok := s.accepted(fileSHA256)
	return ok
}

// A forged span in the mark costs the whole decode or fails the
// signature, never admits other bytes or another contract set. Payload
// spans off by one, the whole file and a signature's string, and
// contracts spans off by one, past the object, from the payload's start,
// reversed and empty, each load the signed catalog, contract for
// contract, or nothing.
func TestLoadCatalogMarkForgedSpans(t *testing.T) {
	withBuild(t, "test-build")
	fx := newCatFixture(t)
	path, _ := fx.catalog(t, "c.json", 3, nil)
	want, err := LoadCatalog(path, fx.anchor, fx.state, now)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	sp, _ := fx.state.accepted(fileDigest(data))
	p, c := sp.payload, sp.contracts
	if c == ([2]int{}) {
		t.Fatal("no contracts span noted")
	}
	key := bytes.LastIndex(data, []byte(`"sig"`)) + len(`"sig"`)
	sigStart := key + bytes.IndexByte(data[key:], '"')
	sigEnd := sigStart + 1 + bytes.IndexByte(data[sigStart+1:], '"') + 1
	var forgeries []spans
	for _, f := range [][2]int{{p[0] + 1, p[1]}, {p[0], p[1] - 1}, {0, len(data)}, {sigStart, sigEnd}, {p[1], p[0]}} {
		forgeries = append(forgeries, spans{payload: f, contracts: c})
	}
	for _, f := range [][2]int{{c[0] + 1, c[1]}, {c[0], c[1] - 1}, {c[0], c[1] + 40}, {0, c[1]}, {c[1], c[0]}, {c[0], c[0] + 2}} {
		forgeries = append(forgeries, spans{payload: p, contracts: f})
	}
	for _, forged := range forgeries {
		fx.state.markAccepted(fileDigest(data), forged)
		got, err := LoadCatalog(path, fx.anchor, fx.state, now)
		if err != nil {
			continue // refused: fine
		}
		if got.Digest != want.Digest || !slices.Equal(got.Catalog.ContractIDs(), want.Catalog.ContractIDs()) {
			t.Fatalf("spans %+v: %s %v, want %s %v", forged, got.Digest, got.Catalog.ContractIDs(), want.Digest, want.Catalog.ContractIDs())
		}
		for _, id := range want.Catalog.ContractIDs() {
			w, _ := want.Catalog.Contract(id)
			if g, ok := got.Catalog.Contract(id); !ok || !reflect.DeepEqual(g, w) {
				t.Fatalf("spans %+v: contract %s differs", forged, id)
			}
		}
	}
}
