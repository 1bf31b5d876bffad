package cli

import (
	"crypto/ed25519"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

func rulesJSON(expires time.Time, argv string) string {
	return `{"schema": "` + spec.SchemaAnalyzerRules + `", "analyzer": "ref-analyzer", "version": 1,
  "issued_at": "2026-11-01T00:00:00Z", "expires_at": "` + expires.UTC().Format(time.RFC3339) + `",
  "rules": [{"id": "go-build", "class": "build", "confidence_bp": 9000,
    "executable_sha256": ["` + strings.Repeat("ab", 32) + `"], "argv": ` + argv + `}],
  "history": {"per_run_bp": 200, "max_bp": 1000}}`
}

// TestAnalyzerRulesSign: rules keygen prints the rules_key; rules sign
// signs the exact bytes with payloadType analyzer-rules, and the envelope
// opens with that key only.
func TestAnalyzerRulesSign(t *testing.T) {
	dir := t.TempDir()
	std().run(t, "analyzer", "rules", "keygen", "--out", dir).want(t, ExitOK, []string{"analyzers[].rules_key: "}, nil)
	kp := pairIn(dir, "analyzer-rules")
	in := writeFile(t, dir, "rules.json", rulesJSON(testNow.Add(24*time.Hour), `["go", "build", "**"]`))
	out := filepath.Join(dir, "rules.dsse")
	std().run(t, "analyzer", "rules", "sign", "--key", kp.private, "--in", in, "--out", out).
		want(t, ExitOK, []string{"signed analyzer rules version 1 for ref-analyzer (1 rules"}, nil)
	pub, err := spec.ParsePublicKeyHex(string(readFile(t, kp.public)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := spec.OpenAnalyzerRules(readFile(t, out), pub)
	if err != nil || r.Rules[0].ID != "go-build" {
		t.Fatalf("open rules: %+v, %v", r, err)
	}
	payload, _ := mustEnvelope(t, out).Verify(spec.PayloadTypeAnalyzerRules, []ed25519.PublicKey{pub}, 1)
	if string(payload) != string(readFile(t, in)) {
		t.Error("signed payload differs from the input bytes")
	}
	other := analyzerKeys(t)
	otherPub, _ := spec.ParsePublicKeyHex(string(readFile(t, other.public)))
	if _, err := spec.OpenAnalyzerRules(readFile(t, out), otherPub); err == nil {
		t.Error("the rules open with another key")
	}
}

// TestAnalyzerRulesSignRefuses: invalid rules are not signed (exit 1, one
// line per problem); expired ones are signed with a warning.
func TestAnalyzerRulesSignRefuses(t *testing.T) {
	dir := t.TempDir()
	std().run(t, "analyzer", "rules", "keygen", "--out", dir).want(t, ExitOK, nil, nil)
	kp := pairIn(dir, "analyzer-rules")
	bad := writeFile(t, dir, "bad.json", rulesJSON(testNow.Add(time.Hour), `["**", "x"]`))
	std().run(t, "analyzer", "rules", "sign", "--key", kp.private, "--in", bad, "--out", filepath.Join(dir, "bad.dsse")).
		want(t, ExitRefused, nil, []string{"rules[0].argv[0]", "may only be the last pattern"})
	argvOnly := writeFile(t, dir, "argv-only.json", strings.Replace(rulesJSON(testNow.Add(time.Hour), `["go", "**"]`), `"executable_sha256": ["`+strings.Repeat("ab", 32)+`"], `, "", 1))
	std().run(t, "analyzer", "rules", "sign", "--key", kp.private, "--in", argvOnly, "--out", filepath.Join(dir, "argv-only.dsse")).
		want(t, ExitRefused, nil, []string{"rules[0].executable_sha256", "is required"})
	old := writeFile(t, dir, "old.json", rulesJSON(testNow.Add(-time.Hour), `["make"]`))
	std().run(t, "analyzer", "rules", "sign", "--key", kp.private, "--in", old, "--out", filepath.Join(dir, "old.dsse")).
		want(t, ExitOK, nil, []string{"analyzer will refuse to start"})
}

// TestAnalyzerServeUsage: serve needs --id, --rules and --key.
func TestAnalyzerServeUsage(t *testing.T) {
	r := std().run(t, "analyzer", "serve", "--rules", "r", "--key", "k")
	r.want(t, ExitUsage, nil, []string{"--id is required"})
	if !strings.Contains(r.stderr, "analyzer serve") {
		t.Errorf("stderr %q does not name the command", r.stderr)
	}
	std().run(t, "analyzer", "keygen", "--out", filepath.Join(t.TempDir(), "k")).want(t, ExitOK, []string{"analyzers[].public_key: "}, nil)
}
