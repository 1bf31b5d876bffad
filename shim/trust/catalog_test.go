package trust

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type catFixture struct {
	dir    string
	anchor ed25519.PublicKey
	key    ed25519.PrivateKey
	state  *FileState
}

func newCatFixture(t testing.TB) *catFixture {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &catFixture{dir: dir, anchor: pub, key: priv, state: NewFileState(StateFile(filepath.Join(dir, "state")))}
}

func catalogDoc(version uint64, mut func(*spec.Catalog)) *spec.Catalog {
	_, an, _ := ed25519.GenerateKey(rand.Reader)
	c := &spec.Catalog{
		Schema: spec.SchemaCatalog, Version: version, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(24 * time.Hour),
		Contracts: map[string]spec.Contract{"offline": {ID: "offline", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}}},
		Analyzers: []spec.Analyzer{{ID: "ref-analyzer", Models: []string{"ref-model-1"}, PublicKey: hex.EncodeToString(an.Public().(ed25519.PublicKey)),
			Classes: []string{"build"}, MinConfidenceBP: 8000, MinMarginBP: 500, MaxLifetime: "1h"}},
		Selectors: []spec.Selector{{ID: "ci", Match: spec.SelectorMatch{ContainerdNamespace: "builds"},
			Routes: map[string]string{"build": "offline"}, SafeDefault: "offline"}},
	}
	if mut != nil {
		mut(c)
	}
	return c
}

// write signs payload (a catalog or any JSON value) and writes the envelope
// to a new file; it returns the path and the payload bytes.
func (fx *catFixture) write(t *testing.T, name string, payload any, payloadType string, key ed25519.PrivateKey) (string, []byte) {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	env, err := spec.SignEnvelope(payloadType, b, key)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(env)
	p := filepath.Join(fx.dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func (fx *catFixture) catalog(t *testing.T, name string, version uint64, mut func(*spec.Catalog)) (string, []byte) {
	return fx.write(t, name, catalogDoc(version, mut), spec.PayloadTypeCatalog, fx.key)
}

func (fx *catFixture) stored(t *testing.T) (State, bool) {
	t.Helper()
	var st State
	var found bool
	if err := fx.state.Update(func(cur State, ok bool) (State, bool, error) { st, found = cur, ok; return cur, false, nil }); err != nil {
		t.Fatal(err)
	}
	return st, found
}

func expectCatalogRule(t *testing.T, l *Loaded, err error, path string, rule Rule) {
	t.Helper()
	var ce *CatalogError
	if !errors.As(err, &ce) || l != nil {
		t.Fatalf("got %v, %v; want *CatalogError %s", l, err, rule)
	}
	if ce.Rule != rule {
		t.Fatalf("rule %s, want %s: %v", ce.Rule, rule, err)
	}
	if !errors.Is(err, ErrCatalogRefused) || !strings.Contains(err.Error(), path) {
		t.Errorf("error does not match ErrCatalogRefused or name %s: %v", path, err)
	}
	t.Logf("%s: %v", rule, err)
}

func TestLoadCatalogAcceptsAndRecords(t *testing.T) {
	fx := newCatFixture(t)
	p, payload := fx.catalog(t, "v3.json", 3, nil)
	l, err := LoadCatalog(p, fx.anchor, fx.state, now)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	if l.Version != 3 || l.Digest != "sha256:"+hex.EncodeToString(sum[:]) || l.Catalog.Selectors[0].ID != "ci" {
		t.Fatalf("loaded = %+v", l)
	}
	st, found := fx.stored(t)
	if !found || st.Version != 3 || st.PayloadSHA256 != hex.EncodeToString(sum[:]) || !st.ExpiresAt.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("state = %+v (found %v)", st, found)
	}
	fi, err := os.Stat(fx.state.Path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode: %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(fx.state.Path)); di.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v, want 0700", di.Mode().Perm())
	}

	// The same catalog again, then a newer one.
	if _, err := LoadCatalog(p, fx.anchor, fx.state, now); err != nil {
		t.Fatalf("reload of the accepted catalog: %v", err)
	}
	p4, _ := fx.catalog(t, "v4.json", 4, nil)
	if _, err := LoadCatalog(p4, fx.anchor, fx.state, now); err != nil {
		t.Fatal(err)
	}
	if st, _ := fx.stored(t); st.Version != 4 {
		t.Fatalf("high-water mark not advanced: %+v", st)
	}

	// Rollback and equivocation.
	l, err = LoadCatalog(p, fx.anchor, fx.state, now)
	expectCatalogRule(t, l, err, p, RuleRollback)
	p4b, _ := fx.catalog(t, "v4b.json", 4, func(c *spec.Catalog) { c.Selectors[0].ID = "other" })
	l, err = LoadCatalog(p4b, fx.anchor, fx.state, now)
	expectCatalogRule(t, l, err, p4b, RuleEquivocation)
	if st, _ := fx.stored(t); st.Version != 4 {
		t.Fatalf("refusal changed the mark: %+v", st)
	}
}

func TestLoadCatalogRefuses(t *testing.T) {
	fx := newCatFixture(t)
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	cases := []struct {
		name string
		make func() string
		now  time.Time
		rule Rule
	}{
		{"expired", func() string { p, _ := fx.catalog(t, "exp.json", 1, nil); return p }, now.Add(24 * time.Hour), RuleExpired},
		{"issued in the future", func() string {
			p, _ := fx.catalog(t, "fut.json", 1, func(c *spec.Catalog) { c.IssuedAt = now.Add(ClockSkew + time.Second) })
			return p
		}, now, RuleNotYetValid},
		{"signed by another key", func() string {
			p, _ := fx.write(t, "stranger.json", catalogDoc(1, nil), spec.PayloadTypeCatalog, stranger)
			return p
		}, now, RuleSignature},
		{"payload type", func() string {
			p, _ := fx.write(t, "ptype.json", catalogDoc(1, nil), spec.PayloadTypeInference, fx.key)
			return p
		}, now, RulePayloadType},
		{"invalid payload", func() string {
			p, _ := fx.catalog(t, "invalid.json", 1, func(c *spec.Catalog) { c.Selectors[0].Routes["build"] = "missing" })
			return p
		}, now, RuleFormat},
		{"duplicate key in payload", func() string {
			p, _ := fx.write(t, "dup.json", json.RawMessage(`{"version":9,"version":1}`), spec.PayloadTypeCatalog, fx.key)
			return p
		}, now, RuleFormat},
		{"not an envelope", func() string { return writeRaw(t, fx.dir, "garbage.json", "{}") }, now, RuleFormat},
		{"too large", func() string { return writeRaw(t, fx.dir, "big.json", strings.Repeat(" ", spec.MaxEnvelopeBytes+1)) }, now, RuleSize},
		{"missing", func() string { return filepath.Join(fx.dir, "absent.json") }, now, RuleMissing},
		{"relative", func() string { return "catalog.signed.json" }, now, RuleAbsolutePath},
		{"symlink", func() string {
			p, _ := fx.catalog(t, "real.json", 1, nil)
			l := filepath.Join(fx.dir, "link.json")
			must(t, os.Symlink(p, l))
			return l
		}, now, RuleSymlink},
		{"fifo", func() string {
			p := filepath.Join(fx.dir, "fifo.json")
			must(t, unix.Mkfifo(p, 0o644))
			return p
		}, now, RuleRegular},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.make()
			l, err := LoadCatalog(p, fx.anchor, fx.state, tc.now)
			expectCatalogRule(t, l, err, p, tc.rule)
			if _, found := fx.stored(t); found {
				t.Fatal("a refused catalog reached the state file")
			}
		})
	}
	p, _ := fx.catalog(t, "skew.json", 1, func(c *spec.Catalog) { c.IssuedAt = now.Add(ClockSkew) })
	if _, err := LoadCatalog(p, fx.anchor, fx.state, now); err != nil {
		t.Fatalf("issued_at within the clock skew refused: %v", err)
	}
	l, err := LoadCatalog(p, fx.anchor[:31], fx.state, now)
	expectCatalogRule(t, l, err, p, RuleSignature)
}

func writeRaw(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	must(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// A load is current while the file, the anchor, the window and the
// high-water mark all still admit it; any change makes the caller load
// again.
func TestLoadedCurrent(t *testing.T) {
	fx := newCatFixture(t)
	path, _ := fx.catalog(t, "c.json", 3, nil)
	l, err := LoadCatalog(path, fx.anchor, fx.state, now)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Current(path, fx.anchor, fx.state, now.Add(time.Second)) {
		t.Fatal("an unchanged load is not current")
	}
	other := newCatFixture(t)
	if l.Current(path, other.anchor, fx.state, now) {
		t.Fatal("current under another anchor")
	}
	if l.Current(path, fx.anchor, fx.state, now.Add(25*time.Hour)) {
		t.Fatal("current past its expiry")
	}
	if (&Loaded{}).Current(path, fx.anchor, fx.state, now) || (*Loaded)(nil).Current(path, fx.anchor, fx.state, now) {
		t.Fatal("a load LoadCatalog did not return is current")
	}

	// The same version re-signed (other bytes): the file changed.
	data, _ := os.ReadFile(path)
	fx.catalog(t, "c.json", 3, nil)
	if l.Current(path, fx.anchor, fx.state, now) {
		t.Fatal("current after the file changed")
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if !l.Current(path, fx.anchor, fx.state, now) {
		t.Fatal("not current with the file's bytes back")
	}

	// A newer version accepted meanwhile (from another file): the mark
	// no longer admits this one.
	newer, _ := fx.catalog(t, "newer.json", 4, nil)
	if _, err := LoadCatalog(newer, fx.anchor, fx.state, now); err != nil {
		t.Fatal(err)
	}
	if l.Current(path, fx.anchor, fx.state, now) {
		t.Fatal("current below the high-water mark")
	}
	if st, _ := fx.stored(t); st.Version != 4 {
		t.Fatalf("Current changed the high-water mark: %+v", st)
	}

	// No mark at all (the state file removed): not current.
	fresh := newCatFixture(t)
	p2, _ := fresh.catalog(t, "c.json", 3, nil)
	l2, err := LoadCatalog(p2, fresh.anchor, fresh.state, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(fresh.state.Path); err != nil {
		t.Fatal(err)
	}
	if l2.Current(p2, fresh.anchor, fresh.state, now) {
		t.Fatal("current without a high-water mark")
	}
}

// Current never waits for the state's lock nor creates the state: a lock
// another load holds, or a state directory gone, is "not current" at once
// (the caller's own load then waits or creates).
func TestLoadedCurrentBusyOrGoneState(t *testing.T) {
	fx := newCatFixture(t)
	path, _ := fx.catalog(t, "c.json", 3, nil)
	l, err := LoadCatalog(path, fx.anchor, fx.state, now)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(fx.state.Path+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if l.Current(path, fx.anchor, fx.state, now) {
		t.Fatal("current while another load holds the state's lock")
	}
	if d := time.Since(start); d > lockWait/2 {
		t.Fatalf("Current waited %s for the lock", d)
	}
	lock.Close()
	if !l.Current(path, fx.anchor, fx.state, now) {
		t.Fatal("not current once the lock is free")
	}
	dir := filepath.Dir(fx.state.Path)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if l.Current(path, fx.anchor, fx.state, now) {
		t.Fatal("current without its state directory")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Current created the state directory: %v", err)
	}
}
