package service

import (
	"testing"
	"time"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/trust"
	"github.com/gensee/gensee/spec"
)

// doneLoad is a finished catalog load of cat.
func doneLoad(cat *trust.Loaded) *catalogLoad {
	l := &catalogLoad{done: make(chan struct{}), cat: cat}
	close(l.done)
	return l
}

func loadedPreload(cfg config.Config, cat *catalogLoad) *preload {
	p := &preload{loaded: make(chan struct{}), cfg: cfg, cat: cat}
	close(p.loaded)
	return p
}

// The preload serves one Create, only for the config it loaded; the
// validity window is checked again at that Create's time.
func TestPreloadTake(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cfg := config.Config{Catalog: "/etc/gensee/catalog.signed.json", StateDir: "/var/lib/gensee"}
	cat := &trust.Loaded{Catalog: &spec.Catalog{Version: 3, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Minute)}}

	var none *preload
	if none.take(cfg, func() time.Time { return now }) != nil {
		t.Fatal("no preload gave a load")
	}
	p := loadedPreload(cfg, doneLoad(cat))
	other := cfg
	other.StateDir = "/var/lib/other"
	if p.take(other, func() time.Time { return now }) != nil {
		t.Fatal("a preload served a Create of another config")
	}
	if p.take(cfg, func() time.Time { return now }) != nil {
		t.Fatal("a preload served a second Create")
	}

	p = loadedPreload(cfg, doneLoad(cat))
	l := p.take(cfg, func() time.Time { return now })
	if l == nil || !l.preloaded {
		t.Fatal("the preload did not serve its Create")
	}
	if got, _, rf := l.wait(); got != cat || rf != nil {
		t.Fatalf("got %v, %v", got, rf)
	}

	// Expired between the preload and Create: refused as a Create's own
	// load would refuse it then.
	p = loadedPreload(cfg, doneLoad(cat))
	l = p.take(cfg, func() time.Time { return now.Add(2 * time.Minute) })
	if got, _, rf := l.wait(); got != nil || rf == nil || rf.Reason != engine.ReasonCatalog {
		t.Fatalf("an expired preloaded catalog: %v, %v", got, rf)
	}
}
