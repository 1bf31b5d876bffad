package reference

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/trust"
	"github.com/gensee/gensee/spec"
)

// TestLoadRefusals: every input that would make the analyzer sign what the
// runtime refuses, or sign under rules nobody approved, stops it at start
// with the rule named and a fix.
func TestLoadRefusals(t *testing.T) {
	for _, tt := range []struct {
		name string
		mut  func(fx *fixture, c *Config)
		rule Rule
		says string
	}{
		{"unknown analyzer", func(_ *fixture, c *Config) { c.ID = "nobody" }, RuleUnknownAnalyzer, `lists no analyzer "nobody"`},
		{"no rules key", func(fx *fixture, _ *Config) { fx.cat.Analyzers[0].RulesKey = "" }, RuleNoRulesKey, "no rules_key"},
		{"rules signed by another key", func(fx *fixture, _ *Config) { fx.writeRules(nil, genKey(t)) }, RuleRulesSignature, "do not verify"},
		{"rules signed by the analyzer key", func(fx *fixture, _ *Config) { fx.writeRules(nil, fx.key) }, RuleRulesSignature, "do not verify"},
		{"rules missing", func(_ *fixture, c *Config) { c.RulesFile += ".missing" }, RuleRulesFile, "read rules"},
		{"rules for another analyzer", func(fx *fixture, _ *Config) {
			fx.writeRules(func(r *spec.AnalyzerRules) { r.Analyzer = "other" }, fx.rulesK)
		}, RuleRulesAnalyzer, `for analyzer "other"`},
		{"rules expired", func(fx *fixture, _ *Config) {
			fx.writeRules(func(r *spec.AnalyzerRules) { r.ExpiresAt = fx.now }, fx.rulesK)
		}, RuleRulesWindow, "expired"},
		{"rules not yet valid", func(fx *fixture, _ *Config) {
			fx.writeRules(func(r *spec.AnalyzerRules) { r.IssuedAt = fx.now.Add(time.Hour) }, fx.rulesK)
		}, RuleRulesWindow, "issued at"},
		{"class out of scope", func(fx *fixture, _ *Config) {
			fx.writeRules(func(r *spec.AnalyzerRules) { r.Rules[0].Class = "deploy" }, fx.rulesK)
		}, RuleRulesScope, `class "deploy"`},
		{"wrong key", func(fx *fixture, _ *Config) { fx.writeKey(genKey(t)) }, RuleWrongKey, "wrong key"},
		{"malformed key", func(fx *fixture, c *Config) { c.KeyFile = fx.write("bad.hex", []byte("zz\n")) }, RuleKeyFile, "parse private key"},
		{"unknown model", func(_ *fixture, c *Config) { c.Model = "gpt-x" }, RuleUnknownModel, `model "gpt-x"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			c := fx.config()
			tt.mut(fx, &c)
			_, err := Load(context.Background(), c)
			var se *StartError
			if !errors.As(err, &se) || se.Rule != tt.rule || !errors.Is(err, ErrRefused) {
				t.Fatalf("Load = %v; want a StartError of rule %s", err, tt.rule)
			}
			if !strings.Contains(err.Error(), tt.says) || se.Fix == "" {
				t.Errorf("message %q: want it to say %q and name a fix", err, tt.says)
			}
		})
	}
}

// TestLoadLifetime: the configured lifetime, at most max_lifetime.
func TestLoadLifetime(t *testing.T) {
	fx := newFixture(t)
	for _, tt := range []struct{ want, got time.Duration }{{0, DefaultLifetime}, {5 * time.Minute, 5 * time.Minute}, {3 * time.Hour, time.Hour}} {
		c := fx.config()
		c.Lifetime = tt.want
		a, err := Load(context.Background(), c)
		if err != nil || a.lifetime != tt.got {
			t.Errorf("Lifetime %s: got %v, %v; want %s", tt.want, a, err, tt.got)
		}
	}
}

// TestRecordsDir: the analyzer reads history where shim/record writes it.
func TestRecordsDir(t *testing.T) {
	if got := (record.Store{Dir: "/var/lib/gensee"}).OperationsDir(); got != filepath.Join("/var/lib/gensee", "operations") {
		t.Errorf("OperationsDir = %s", got)
	}
}

// TestMemoryState: the analyzer's catalog high-water mark moves in memory only.
func TestMemoryState(t *testing.T) {
	dir := t.TempDir()
	var s memoryState
	if _, err := LoadCatalog(filepath.Join(dir, "anchor.hex"), filepath.Join(dir, "catalog.json"), time.Now()); err == nil {
		t.Fatal("LoadCatalog without an anchor succeeded")
	}
	for _, v := range []uint64{2, 1} {
		s.Update(func(cur trust.State, found bool) (trust.State, bool, error) {
			return trust.State{Version: v}, !found || v > cur.Version, nil
		})
	}
	if !s.found || s.cur.Version != 2 {
		t.Errorf("state %+v, want version 2", s.cur)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("LoadCatalog wrote %v", entries)
	}
}
