package service

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/spec"
)

// preloadFixture is an operator config whose anchor and signed catalog
// (version 3, expiring an hour after now) are on disk, and its preload,
// done.
func preloadFixture(t *testing.T, now time.Time) (config.Config, ed25519.PrivateKey) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the trust anchor must be owned by root (make test runs as root)")
	}
	// The anchor's directories must be root's alone (not /tmp).
	dir, err := os.MkdirTemp("/run", "gensee-preload-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{Catalog: filepath.Join(dir, "catalog.signed.json"), TrustAnchor: filepath.Join(dir, "anchor.hex"), StateDir: filepath.Join(dir, "state")}
	if err := os.WriteFile(cfg.TrustAnchor, []byte(hex.EncodeToString(pub)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cfg.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	signCatalog(t, cfg, priv, 3, now)
	return cfg, priv
}

// signCatalog writes version of the catalog, signed by priv.
func signCatalog(t *testing.T, cfg config.Config, priv ed25519.PrivateKey, version uint64, now time.Time) {
	t.Helper()
	c := &spec.Catalog{Schema: spec.SchemaCatalog, Version: version, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour),
		Contracts: map[string]spec.Contract{"offline": {ID: "offline", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}}},
		Selectors: []spec.Selector{{ID: "builds", Match: spec.SelectorMatch{ContainerdNamespace: "builds"}, SafeDefault: "offline"}}}
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	env, err := spec.SignEnvelope(spec.PayloadTypeCatalog, payload, priv)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(env)
	if err := os.WriteFile(cfg.Catalog, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// preloadOf is a finished preload of cfg at now.
func preloadOf(cfg config.Config, now time.Time) *preload {
	p := &preload{started: now, loaded: make(chan struct{}), cfg: cfg, cat: startCatalog(cfg, func() time.Time { return now })}
	p.cat.wait()
	close(p.loaded)
	return p
}

// The preload serves one Create, only for the config it loaded, and only
// while it is current and fresh: a catalog replaced, rolled forward by
// another load or expired since, or a Create long after the shim's start,
// gets the catalog as it is at Create.
func TestPreloadTake(t *testing.T) {
	now := time.Now()
	cfg, priv := preloadFixture(t, now)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return now.Add(d) } }

	var none *preload
	if none.take(cfg, at(0)) != nil {
		t.Fatal("no preload gave a load")
	}
	p := preloadOf(cfg, now)
	other := cfg
	other.GateTimeout = config.Duration{Duration: time.Minute}
	if p.take(other, at(0)) != nil {
		t.Fatal("a preload served a Create of another config")
	}
	if p.take(cfg, at(0)) != nil {
		t.Fatal("a preload served a second Create")
	}

	p = preloadOf(cfg, now)
	l := p.take(cfg, at(time.Millisecond))
	if got, _, rf := l.wait(); rf != nil || got == nil || got.Version != 3 || !l.preloaded {
		t.Fatalf("a current preload: %+v, %v, preloaded %v", got, rf, l.preloaded)
	}

	// Too late after the shim's start: loaded again.
	p = preloadOf(cfg, now)
	l = p.take(cfg, at(preloadFresh+time.Second))
	if got, _, rf := l.wait(); rf != nil || got == nil || l.preloaded {
		t.Fatalf("a stale preload: %+v, %v, preloaded %v", got, rf, l.preloaded)
	}

	// Expired by Create's time: refused as a load then refuses it.
	p = preloadOf(cfg, now)
	l = p.take(cfg, at(2*time.Hour))
	if got, _, rf := l.wait(); got != nil || rf == nil || rf.Reason != engine.ReasonCatalog || l.preloaded {
		t.Fatalf("an expired preload: %+v, %v", got, rf)
	}

	// Replaced by version 4 between the preload and Create: Create gets 4.
	p = preloadOf(cfg, now)
	signCatalog(t, cfg, priv, 4, now)
	l = p.take(cfg, at(time.Millisecond))
	if got, _, rf := l.wait(); rf != nil || got == nil || got.Version != 4 || l.preloaded {
		t.Fatalf("a replaced catalog: %+v, %v, preloaded %v", got, rf, l.preloaded)
	}

	// The preloaded version 3, then version 4 accepted by another load,
	// then version 3's very bytes back in the file: the preload is not
	// served, and the rollback is refused as a load now refuses it.
	cfg, priv = preloadFixture(t, now)
	v3, err := os.ReadFile(cfg.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	p = preloadOf(cfg, now)
	signCatalog(t, cfg, priv, 4, now)
	if _, rf := engine.LoadTrust(cfg, cfg.Catalog, "catalog", now); rf != nil {
		t.Fatal(rf)
	}
	if err := os.WriteFile(cfg.Catalog, v3, 0o644); err != nil {
		t.Fatal(err)
	}
	l = p.take(cfg, at(time.Millisecond))
	if got, _, rf := l.wait(); got != nil || rf == nil || l.preloaded {
		t.Fatalf("a preload below the high-water mark: %+v, %v, preloaded %v", got, rf, l.preloaded)
	}
}
