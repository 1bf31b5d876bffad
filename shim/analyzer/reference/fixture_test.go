package reference

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

const (
	rt      = "io.containerd.gensee.v2"
	exeGo   = "1111111111111111111111111111111111111111111111111111111111111111"
	exeMake = "2222222222222222222222222222222222222222222222222222222222222222"
)

// fixture is a validated catalog whose analyzer ref-analyzer runs as the
// reference analyzer, its keys and rules written into a temp dir, and the
// clock.
type fixture struct {
	t       testing.TB
	cat     *spec.Catalog
	key     ed25519.PrivateKey // ref-analyzer's signing key
	rulesK  ed25519.PrivateKey // the operator key of its rules
	dir     string
	records string
	now     time.Time
	rules   spec.AnalyzerRules
}

func genKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

func pubHex(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }

func newFixture(t testing.TB) *fixture {
	t.Helper()
	fx := &fixture{t: t, key: genKey(t), rulesK: genKey(t), dir: t.TempDir(), now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	fx.records = filepath.Join(fx.dir, "operations")
	deny := spec.Network{Mode: spec.NetworkDenyAll}
	fx.cat = &spec.Catalog{
		Schema: spec.SchemaCatalog, Version: 3,
		IssuedAt: fx.now.Add(-24 * time.Hour), ExpiresAt: fx.now.Add(365 * 24 * time.Hour),
		Contracts: map[string]spec.Contract{
			"offline":  {ID: "offline", Version: 1, Network: deny, Workspace: "/workspace"},
			"readonly": {ID: "readonly", Version: 2, Network: deny},
		},
		Analyzers: []spec.Analyzer{{ID: "ref-analyzer", Models: []string{DefaultModel}, PublicKey: pubHex(fx.key),
			Classes: []string{"build", "fetch", "lint"}, MinConfidenceBP: 8000, MinMarginBP: 500, MaxLifetime: "1h", RulesKey: pubHex(fx.rulesK)}},
		Selectors: []spec.Selector{{ID: "ci-builds", Match: spec.SelectorMatch{ContainerdNamespace: "builds", Runtime: rt},
			Routes: map[string]string{"build": "offline", "fetch": "offline", "lint": "offline"}, SafeDefault: "readonly",
			Analyzer:    &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: "/run/gensee/analyzer.sock", Timeout: "200ms"},
			VolatileEnv: []string{"HOSTNAME"}}},
	}
	if err := fx.cat.Validate(); err != nil {
		t.Fatalf("fixture catalog does not validate: %v", err)
	}
	fx.rules = spec.AnalyzerRules{Schema: spec.SchemaAnalyzerRules, Analyzer: "ref-analyzer", Version: 1,
		IssuedAt: fx.now.Add(-time.Hour), ExpiresAt: fx.now.Add(30 * 24 * time.Hour),
		Rules: []spec.AnalyzerRule{
			{ID: "go-build", Class: "build", ConfidenceBP: 9000, ExecutableSHA256: []string{exeGo}, Argv: []string{"go", "build", "**"}},
			{ID: "go-vet", Class: "lint", ConfidenceBP: 9000, ExecutableSHA256: []string{exeGo}, Argv: []string{"go", "vet", "*"}},
			{ID: "make", Class: "build", ConfidenceBP: 7000, ExecutableSHA256: []string{exeMake}},
			{ID: "make-ci-image", Class: "build", ConfidenceBP: 8500, ExecutableSHA256: []string{exeMake}, Image: []string{"registry.example/ci:1"}},
			{ID: "fetch-mod", Class: "fetch", ConfidenceBP: 9500, ExecutableSHA256: []string{exeGo}, Argv: []string{"go", "mod", "down*"}},
		},
		History: &spec.HistoryPolicy{PerRunBP: 200, MaxBP: 1000},
	}
	fx.writeKey(fx.key)
	fx.writeRules(nil, fx.rulesK)
	return fx
}

func (fx *fixture) write(name string, data []byte) string {
	p := filepath.Join(fx.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		fx.t.Fatal(err)
	}
	return p
}

func (fx *fixture) writeKey(k ed25519.PrivateKey) {
	fx.write("analyzer-private-key.hex", []byte(spec.FormatPrivateKeyHex(k)))
}

// writeRules writes fx.rules, changed by mut, signed by key.
func (fx *fixture) writeRules(mut func(*spec.AnalyzerRules), key ed25519.PrivateKey) {
	r := fx.rules
	r.Rules = append([]spec.AnalyzerRule(nil), r.Rules...)
	if mut != nil {
		mut(&r)
	}
	fx.write("rules.dsse", signed(fx.t, spec.PayloadTypeAnalyzerRules, r, key))
}

func (fx *fixture) config() Config {
	return Config{Catalog: fx.cat, ID: "ref-analyzer", RulesFile: filepath.Join(fx.dir, "rules.dsse"),
		KeyFile: filepath.Join(fx.dir, "analyzer-private-key.hex"), Records: fx.records, Now: func() time.Time { return fx.now }}
}

func (fx *fixture) load() *Analyzer {
	fx.t.Helper()
	a, err := Load(context.Background(), fx.config())
	if err != nil {
		fx.t.Fatal(err)
	}
	return a
}

// request is a valid request for a command of executable exe.
func (fx *fixture) request(exe string, args ...string) spec.AnalyzerRequest {
	fx.t.Helper()
	cmd := spec.Command{Args: args, Env: []string{"PATH=/usr/bin", "GOCACHE=/tmp/secret-cache"}, Cwd: "/src"}
	cd, err := cmd.Digest()
	if err != nil {
		fx.t.Fatal(err)
	}
	obs := spec.Observation{Schema: spec.SchemaObservation, UID: 1000, GID: 1000, ExecutableSHA256: exe, CommandDigest: cd}
	od, err := obs.Digest()
	if err != nil {
		fx.t.Fatal(err)
	}
	return spec.AnalyzerRequest{Schema: spec.SchemaAnalyzerRequest, Analyzer: "ref-analyzer", Selector: "ci-builds", Door: spec.DoorShim,
		Observation: obs, ObservationDigest: od, Command: cmd}
}

// manifest writes an operation's manifest.json, a clean run of digest
// under class changed by mut, and returns its history reference.
func (fx *fixture) manifest(opid, digest, class string, mut func(*spec.Manifest)) spec.HistoryRef {
	fx.t.Helper()
	m := spec.Manifest{Schema: spec.SchemaManifest, OperationID: opid, ObservationDigest: digest,
		Inference:   spec.InferenceSummary{Analyzer: "ref-analyzer", Model: DefaultModel, Class: class, ConfidenceBP: 9000},
		Enforcement: spec.Enforcement{Network: spec.NetworkEnforcement{Mechanism: "nftables", Status: spec.NetworkEnforced}},
		Observation: spec.Observed{DeniedAttempts: spec.DeniedAttempts{Complete: true}},
		Gate:        spec.GateResult{Verdict: spec.VerdictPass}}
	if mut != nil {
		mut(&m)
	}
	data := mustJSON(fx.t, m)
	if _, err := spec.ParseManifest(data); err != nil {
		fx.t.Fatalf("fixture manifest: %v", err)
	}
	dir := filepath.Join(fx.records, opid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fx.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o600); err != nil {
		fx.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return spec.HistoryRef{OperationID: opid, ManifestSHA256: hex.EncodeToString(sum[:])}
}

// signed returns the envelope JSON of payload signed by key.
func signed(t testing.TB, payloadType string, payload any, key ed25519.PrivateKey) []byte {
	t.Helper()
	env, err := spec.SignEnvelope(payloadType, mustJSON(t, payload), key)
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, env)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// opid returns a valid operation id for n.
func opid(n int) string {
	sum := sha256.Sum256([]byte{byte(n)})
	return hex.EncodeToString(sum[:16])
}

// open verifies an answer's inference with the analyzer's key.
func open(t testing.TB, fx *fixture, ans spec.AnalyzerAnswer) *spec.Inference {
	t.Helper()
	if ans.NoClass != "" || len(ans.Inference) == 0 {
		t.Fatalf("answer names no class: %q", ans.NoClass)
	}
	in, a, err := fx.cat.OpenInference(ans.Inference)
	if err != nil || a.ID != "ref-analyzer" {
		t.Fatalf("open inference: %v", err)
	}
	return in
}
