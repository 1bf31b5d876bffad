package engine

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/analyzer/reference"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// refAnalyzer serves the reference analyzer, reading the records of st,
// on a socket, for one rule: executable exe gets class build at 9000 bp.
// It returns the selector that names it.
func refAnalyzer(t *testing.T, st record.Store, exe string, now time.Time) *spec.Selector {
	t.Helper()
	key := func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	anKey, rulesKey := key(), key()
	pub := func(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }
	dir := t.TempDir()
	sock := filepath.Join(dir, "a.sock")
	sel := spec.Selector{ID: "host-jobs", Match: spec.SelectorMatch{Runtime: "host", User: "nobody"},
		Routes: map[string]string{"build": "offline"}, SafeDefault: "offline",
		Analyzer: &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: sock, Timeout: "2s"}}
	cat := &spec.Catalog{Schema: spec.SchemaCatalog, Version: 1, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(24 * time.Hour),
		Contracts: map[string]spec.Contract{"offline": {ID: "offline", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}}},
		Analyzers: []spec.Analyzer{{ID: "ref-analyzer", Models: []string{reference.DefaultModel}, PublicKey: pub(anKey), Classes: []string{"build"},
			MinConfidenceBP: 8000, MinMarginBP: 500, MaxLifetime: "1h", RulesKey: pub(rulesKey)}},
		Selectors: []spec.Selector{sel}}
	if err := cat.Validate(); err != nil {
		t.Fatal(err)
	}
	rules, _ := json.Marshal(spec.AnalyzerRules{Schema: spec.SchemaAnalyzerRules, Analyzer: "ref-analyzer", Version: 1,
		IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour), History: &spec.HistoryPolicy{PerRunBP: 100, MaxBP: 500},
		Rules: []spec.AnalyzerRule{{ID: "job", Class: "build", ConfidenceBP: 9000, ExecutableSHA256: []string{exe}}}})
	env, err := spec.SignEnvelope(spec.PayloadTypeAnalyzerRules, rules, rulesKey)
	if err != nil {
		t.Fatal(err)
	}
	envJSON, _ := json.Marshal(env)
	for name, data := range map[string]string{"rules.dsse": string(envJSON), "key.hex": spec.FormatPrivateKeyHex(anKey)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := reference.Load(context.Background(), reference.Config{Catalog: cat, ID: "ref-analyzer", RulesFile: filepath.Join(dir, "rules.dsse"),
		KeyFile: filepath.Join(dir, "key.hex"), Records: record.Store{Dir: st.Dir}.OperationsDir(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &sel
}

// TestAnalyzerHistoryNotLaundered is the fast form of a live host run
// that misbehaves once under the analyzer's class, then runs on: the
// manifests RecordStore writes (the unclean run, then safe_default runs
// of the same observation and runs of another executable with the same
// command, more than a request names) never push the unclean run out of
// what Asker names, so the reference analyzer keeps the class withheld;
// removing the unclean run's record clears it.
func TestAnalyzerHistoryNotLaundered(t *testing.T) {
	st := record.Store{Dir: t.TempDir()}
	exe, other := strings.Repeat("e", 64), strings.Repeat("f", 64)
	sel := refAnalyzer(t, st, exe, time.Now())
	cmd := spec.Command{Args: []string{"/usr/bin/bash", "-c", "true"}, Env: []string{"PATH=/usr/bin"}, Cwd: "/workspace"}
	cd, _ := cmd.Digest()
	observe := func(exe string) (spec.Observation, string) {
		obs := spec.Observation{Schema: spec.SchemaObservation, UID: 65534, GID: 65534, ExecutableSHA256: exe, CommandDigest: cd}
		d, _ := obs.Digest()
		return obs, d
	}
	obs, digest := observe(exe)
	_, otherDigest := observe(other)
	write := func(digest string, in spec.InferenceSummary, denied bool) string {
		t.Helper()
		id, _ := record.NewOperationID()
		if _, err := st.CreateOperation(id, "host", "run-"+id[:8]); err != nil {
			t.Fatal(err)
		}
		m := &spec.Manifest{Schema: spec.SchemaManifest, OperationID: id, CommandDigest: cd, ObservationDigest: digest, Inference: in,
			Enforcement: spec.Enforcement{Network: spec.NetworkEnforcement{Mechanism: "nftables", Status: spec.NetworkEnforced}},
			Observation: spec.Observed{DeniedAttempts: spec.DeniedAttempts{Complete: true}}, Gate: spec.GateResult{Verdict: spec.VerdictPass}}
		if denied {
			m.Observation.DeniedAttempts.Items = []spec.DeniedAttempt{{Target: "192.0.2.7:443", Proto: "tcp"}}
		}
		if err := (RecordStore{Store: st, ID: id}).WriteManifest(m); err != nil {
			t.Fatal(err)
		}
		return id
	}
	ask := Asker(context.Background(), spec.DoorHost, st, "")
	classed := spec.InferenceSummary{Analyzer: "ref-analyzer", Model: reference.DefaultModel, Class: "build", ConfidenceBP: 9000, Source: spec.InferenceFromAnalyzer}
	if env, con := ask(sel, obs, digest, cmd); env == nil {
		t.Fatalf("before any run: %+v", con)
	}
	unclean := write(digest, classed, true)
	for i := range 2*spec.MaxHistoryRefs + 1 {
		if i%2 == 0 {
			write(digest, spec.InferenceSummary{SafeDefault: true, Reason: "analyzer_no_class"}, false)
		} else {
			write(otherDigest, classed, false)
		}
		env, con := ask(sel, obs, digest, cmd)
		if env != nil || con.Outcome != spec.ConsultNoClass || !strings.Contains(con.Detail, "class build withheld: earlier operation "+unclean) {
			t.Fatalf("after %d more runs: %+v; want build withheld by %s", i+1, con, unclean)
		}
	}
	if err := st.RemoveOperation(unclean); err != nil {
		t.Fatal(err)
	}
	if env, con := ask(sel, obs, digest, cmd); env == nil {
		t.Fatalf("after the unclean run's record is removed: %+v", con)
	}
}
