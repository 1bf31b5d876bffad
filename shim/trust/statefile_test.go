package trust

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestStateCorruptFailsClosed(t *testing.T) {
	fx := newCatFixture(t)
	p, _ := fx.catalog(t, "v1.json", 1, nil)
	must(t, os.MkdirAll(filepath.Dir(fx.state.Path), 0o700))
	for name, content := range map[string]string{
		"not json":      "garbage",
		"version 0":     `{"version":0,"payload_sha256":"` + fmt.Sprintf("%064x", 0) + `","expires_at":"2027-01-01T00:00:00Z"}`,
		"bad sha":       `{"version":1,"payload_sha256":"xyz","expires_at":"2027-01-01T00:00:00Z"}`,
		"duplicate key": `{"version":9,"version":1,"payload_sha256":"` + fmt.Sprintf("%064x", 0) + `","expires_at":"2027-01-01T00:00:00Z"}`,
	} {
		t.Run(name, func(t *testing.T) {
			must(t, os.WriteFile(fx.state.Path, []byte(content), 0o600))
			l, err := LoadCatalog(p, fx.anchor, fx.state, now)
			expectCatalogRule(t, l, err, p, RuleState)
		})
	}
}

func TestStateRefusesSharedDirectory(t *testing.T) {
	fx := newCatFixture(t)
	p, _ := fx.catalog(t, "v1.json", 1, nil)
	dir := filepath.Dir(fx.state.Path)
	must(t, os.MkdirAll(dir, 0o700))
	must(t, os.Chmod(dir, 0o777))
	l, err := LoadCatalog(p, fx.anchor, fx.state, now)
	expectCatalogRule(t, l, err, p, RuleState)
}

func TestStateRefusesSymlink(t *testing.T) {
	fx := newCatFixture(t)
	p, _ := fx.catalog(t, "v1.json", 1, nil)
	must(t, os.MkdirAll(filepath.Dir(fx.state.Path), 0o700))
	must(t, os.Symlink("/dev/null", fx.state.Path))
	l, err := LoadCatalog(p, fx.anchor, fx.state, now)
	expectCatalogRule(t, l, err, p, RuleState)
}

// TestStateConcurrentLoads: shims loading different versions at once
// never lower the mark (Update holds the lock across read and write).
func TestStateConcurrentLoads(t *testing.T) {
	fx := newCatFixture(t)
	const n = 12
	paths := make([]string, n)
	for i := range paths {
		paths[i], _ = fx.catalog(t, fmt.Sprintf("v%d.json", i+1), uint64(i+1), nil)
	}
	var wg sync.WaitGroup
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			store := NewFileState(fx.state.Path) // a separate "shim"
			_, _ = LoadCatalog(paths[i], fx.anchor, store, now)
		}()
	}
	wg.Wait()
	if st, _ := fx.stored(t); st.Version != n {
		t.Fatalf("high-water mark %d after concurrent loads, want %d", st.Version, n)
	}
	entries, _ := os.ReadDir(filepath.Dir(fx.state.Path))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("leftover temp file %s", e.Name())
		}
	}
}
