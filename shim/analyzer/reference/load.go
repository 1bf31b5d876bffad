package reference

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/trust"
	"github.com/gensee/gensee/spec"
)

// Defaults of Config.
const (
	DefaultModel    = "gensee-reference/1"
	DefaultLifetime = 10 * time.Minute
	// maxKeyFile caps the private key file: 64 hex characters and a newline fit.
	maxKeyFile = 256
)

// Config is what the analyzer starts from.
type Config struct {
	// Catalog is the verified catalog (LoadCatalog, or trust.LoadCatalog).
	Catalog *spec.Catalog
	// ID is the catalog analyzer this one runs as.
	ID string
	// RulesFile is the rule set's DSSE envelope, signed by the analyzer's
	// rules_key (gensee analyzer rules sign).
	RulesFile string
	// KeyFile is the analyzer's ed25519 private key (gensee analyzer
	// keygen: the 32-byte seed as 64 lowercase hex).
	KeyFile string
	// Model is the model id the inferences name; DefaultModel if empty.
	Model string
	// Records is the runtime's operations directory (record.Store's OperationsDir of its
	// state dir), read for history; empty: history is never read.
	Records string
	// Lifetime is how long an inference lives, at most the analyzer's
	// max_lifetime; DefaultLifetime if zero.
	Lifetime time.Duration
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// Analyzer answers requests. It is safe for concurrent use.
type Analyzer struct {
	entry    spec.Analyzer // the catalog's entry for this analyzer (a copy)
	catalog  *spec.Catalog // read only
	rules    *spec.AnalyzerRules
	key      ed25519.PrivateKey
	model    string
	lifetime time.Duration
	records  string
	now      func() time.Time
	seen     *seenCache
}

// Load checks cfg and returns the analyzer, or a *StartError naming what
// to fix: the analyzer is in the catalog and has a rules_key; the rules
// verify with it, are for this analyzer, within their validity window at
// now, and name only classes in its scope; the private key is the one
// whose public half the catalog lists; the model is listed.
func Load(ctx context.Context, cfg Config) (*Analyzer, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Catalog == nil {
		return nil, refuse(RuleUnknownAnalyzer, "no catalog", "load the verified catalog first", nil)
	}
	entry := cfg.Catalog.Analyzer(cfg.ID)
	if entry == nil {
		return nil, refuse(RuleUnknownAnalyzer, fmt.Sprintf("the catalog lists no analyzer %q (it lists %q)", cfg.ID, analyzerIDs(cfg.Catalog)),
			"pass --id of an analyzer in the catalog, or add this analyzer to the catalog and publish it", nil)
	}
	rules, err := loadRules(cfg, entry)
	if err != nil {
		return nil, err
	}
	key, err := loadKey(ctx, cfg.KeyFile, entry)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(entry.Models, cfg.Model) {
		return nil, refuse(RuleUnknownModel, fmt.Sprintf("model %q is not listed for analyzer %s (listed: %q)", cfg.Model, entry.ID, entry.Models),
			"pass --model with a listed model, or add it to the analyzer's models in the catalog", nil)
	}
	a := &Analyzer{entry: *entry, catalog: cfg.Catalog, rules: rules, key: key, model: cfg.Model,
		lifetime: lifetime(cfg.Lifetime, entry), records: cfg.Records, now: cfg.Now, seen: newSeenCache()}
	return a, nil
}

// lifetime is the configured lifetime, at most max_lifetime.
func lifetime(want time.Duration, a *spec.Analyzer) time.Duration {
	if want <= 0 {
		want = DefaultLifetime
	}
	if limit, err := time.ParseDuration(a.MaxLifetime); err == nil && limit > 0 && limit < want {
		return limit
	}
	return want
}

// loadRules reads and checks the rules envelope for analyzer a.
func loadRules(cfg Config, a *spec.Analyzer) (*spec.AnalyzerRules, error) {
	if a.RulesKey == "" {
		return nil, refuse(RuleNoRulesKey, fmt.Sprintf("analyzer %s has no rules_key in the catalog", a.ID),
			"put the public half of the operator key that signs the rules (gensee analyzer rules keygen) in analyzers[].rules_key and publish the catalog", nil)
	}
	rk, err := a.RulesPublicKey()
	if err != nil {
		return nil, refuse(RuleNoRulesKey, "the catalog's rules_key is unusable", "fix analyzers[].rules_key", err)
	}
	data, err := readFile(cfg.RulesFile, spec.MaxEnvelopeBytes)
	if err != nil {
		return nil, refuse(RuleRulesFile, "read rules "+cfg.RulesFile, "pass --rules with the envelope gensee analyzer rules sign wrote", err)
	}
	r, err := spec.OpenAnalyzerRules(data, rk)
	if err != nil {
		return nil, refuse(RuleRulesSignature, fmt.Sprintf("rules %s do not verify with analyzer %s's rules_key (keyid %s)", cfg.RulesFile, a.ID, spec.KeyID(rk)),
			"sign the rules with the operator key whose public half is the catalog's rules_key (gensee analyzer rules sign)", err)
	}
	if r.Analyzer != a.ID {
		return nil, refuse(RuleRulesAnalyzer, fmt.Sprintf("rules %s are for analyzer %q, not %q", cfg.RulesFile, r.Analyzer, a.ID),
			"pass the rules made for this analyzer, or set \"analyzer\" in the rules and sign them again", nil)
	}
	if err := checkRulesWindow(r, cfg.Now()); err != nil {
		return nil, err
	}
	for _, rule := range r.Rules {
		if !slices.Contains(a.Classes, rule.Class) {
			return nil, refuse(RuleRulesScope, fmt.Sprintf("rule %q names class %q, outside analyzer %s's scope %q", rule.ID, rule.Class, a.ID, a.Classes),
				"remove the rule or add the class to the analyzer's classes in the catalog", nil)
		}
	}
	return r, nil
}

func checkRulesWindow(r *spec.AnalyzerRules, now time.Time) error {
	if !now.Before(r.ExpiresAt) {
		return refuse(RuleRulesWindow, fmt.Sprintf("rules version %d expired at %s (now %s)", r.Version, stamp(r.ExpiresAt), stamp(now)),
			"sign a new rule set with a later expires_at", nil)
	}
	if r.IssuedAt.After(now.Add(trust.ClockSkew)) {
		return refuse(RuleRulesWindow, fmt.Sprintf("rules version %d are issued at %s, more than %s after now (%s)", r.Version, stamp(r.IssuedAt), trust.ClockSkew, stamp(now)),
			"check this host's clock (NTP) or the rules' issued_at", nil)
	}
	return nil
}

// loadKey reads the analyzer's private key and checks it is a's.
func loadKey(ctx context.Context, path string, a *spec.Analyzer) (ed25519.PrivateKey, error) {
	data, err := readFile(path, maxKeyFile)
	if err != nil {
		return nil, refuse(RuleKeyFile, "read private key "+path, "pass --key with the analyzer-private-key.hex gensee analyzer keygen wrote", err)
	}
	key, err := spec.ParsePrivateKeyHex(string(data))
	if err != nil {
		return nil, refuse(RuleKeyFile, "parse private key "+path, "pass --key with the analyzer-private-key.hex gensee analyzer keygen wrote", err)
	}
	want, err := a.Key()
	if err != nil {
		return nil, refuse(RuleWrongKey, "the catalog's public_key is unusable", "fix analyzers[].public_key", err)
	}
	if pub, _ := key.Public().(ed25519.PublicKey); !bytes.Equal(pub, want) {
		return nil, refuse(RuleWrongKey, fmt.Sprintf("wrong key: %s is key %s, but the catalog lists key %s for analyzer %s", path, spec.KeyID(pub), spec.KeyID(want), a.ID),
			"pass the private key whose public half is the analyzer's public_key, or publish a catalog with this key's public half", nil)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.G(ctx).WithField("key", path).Warnf("analyzer private key has mode %04o, readable beyond its owner; run: chmod 0600 %s", st.Mode().Perm(), path)
	}
	return key, nil
}

// readFile reads a file an operator names (a symlink is their choice, as
// a Kubernetes Secret volume has them): a regular file, at most limit bytes.
func readFile(path string, limit int64) ([]byte, error) {
	f, st, err := fsafe.OpenFileFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fsafe.ReadAll(f, st, limit)
}

func analyzerIDs(c *spec.Catalog) []string {
	ids := make([]string, 0, len(c.Analyzers))
	for _, a := range c.Analyzers {
		ids = append(ids, a.ID)
	}
	return ids
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
