package cli

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// keys runs catalog keygen into a fresh directory and returns the files.
func keys(t *testing.T) keyPair {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	std().run(t, "catalog", "keygen", "--out", dir).want(t, ExitOK,
		[]string{"catalog-root-private-key.hex", "install -o root -g root -m 0400"}, nil)
	return pairIn(dir, "catalog-root")
}

func TestKeygen(t *testing.T) {
	kp := keys(t)
	for p, mode := range map[string]os.FileMode{kp.private: 0o600, kp.public: 0o644} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %04o, want %04o", p, st.Mode().Perm(), mode)
		}
	}
	priv, err := spec.ParsePrivateKeyHex(string(readFile(t, kp.private)))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := spec.ParsePublicKeyHex(string(readFile(t, kp.public)))
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Error("public key file does not match the private key")
	}
	before := readFile(t, kp.private)
	std().run(t, "catalog", "keygen", "--out", filepath.Dir(kp.private)).want(t, ExitUsage, nil, []string{"file exists", "refusing to overwrite"})
	if !bytes.Equal(before, readFile(t, kp.private)) {
		t.Error("keygen replaced an existing private key")
	}
	// A pre-existing public key alone also blocks, and no private key is left behind.
	dir := t.TempDir()
	writeFile(t, dir, "catalog-root-public-key.hex", "x")
	std().run(t, "catalog", "keygen", "--out", dir).want(t, ExitUsage, nil, []string{"file exists"})
	if _, err := os.Stat(filepath.Join(dir, "catalog-root-private-key.hex")); !os.IsNotExist(err) {
		t.Errorf("private key written next to an existing public key: %v", err)
	}
}

// signCatalog signs payload (text) into dir/name and returns the path.
func signCatalog(t *testing.T, h harness, kp keyPair, payload, name string) string {
	t.Helper()
	dir := t.TempDir()
	in := writeFile(t, dir, "payload.json", payload)
	out := filepath.Join(dir, name)
	h.run(t, "catalog", "sign", "--key", kp.private, "--in", in, "--out", out).want(t, ExitOK, []string{"signed catalog version 1"}, nil)
	return out
}

func TestCatalogRoundTrip(t *testing.T) {
	kp := keys(t)
	payload := string(readFile(t, contrib(t, "catalog.json")))
	signed := signCatalog(t, std(), kp, payload, "catalog.signed.json")

	env := mustEnvelope(t, signed)
	if env.PayloadType != spec.PayloadTypeCatalog {
		t.Errorf("payloadType %q", env.PayloadType)
	}
	if got, _ := base64.StdEncoding.DecodeString(env.Payload); string(got) != payload {
		t.Error("the envelope does not carry the exact payload bytes")
	}

	for _, key := range []string{kp.public, strings.TrimSpace(string(readFile(t, kp.public)))} {
		std().run(t, "catalog", "inspect", "--catalog", signed, "--trusted-key", key).want(t, ExitOK,
			[]string{"version     1", "2026-11-29T00:00:00Z", "2027-11-29T00:00:00Z", "sha256:", "offline-structured-result", "allow-exact", "allow_exact (2 tuples)",
				"structured_result:out/result.json", "ref-analyzer", "ref-model-1", "build,fetch", "ci-builds", "containerd_namespace=builds", "build->offline-structured-result",
				"VERIFIERS", "json-schema", "structured_result  24h"}, nil)
	}

	r := std().run(t, "catalog", "inspect", "--catalog", signed, "--trusted-key", kp.public, "--json")
	r.want(t, ExitOK, nil, nil)
	var v InspectView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != 1 || len(v.Contracts) != 2 || v.Contracts[0].ID != "allow-exact" || len(v.Analyzers) != 1 || len(v.Selectors) != 1 || !strings.HasPrefix(v.Digest, "sha256:") ||
		len(v.Verifiers) != 1 || v.Verifiers[0].ID != "json-schema" || len(v.Verifiers[0].KeyID) != 64 {
		t.Errorf("unexpected view: %+v", v)
	}
	c, _ := spec.ParseContract(readFile(t, contrib(t, "allow-exact.json")))
	if d, _ := spec.Digest(*c); v.Contracts[0].Digest != d {
		t.Errorf("contract digest %s, want spec.Digest %s", v.Contracts[0].Digest, d)
	}
}

func TestCatalogInspectRefusals(t *testing.T) {
	kp := keys(t)
	other := keys(t)
	payload := string(readFile(t, contrib(t, "catalog.json")))
	signed := signCatalog(t, std(), kp, payload, "catalog.signed.json")
	dir := t.TempDir()

	// One payload byte flipped, re-encoded as valid base64: the signature fails.
	env := mustEnvelope(t, signed)
	raw, _ := base64.StdEncoding.DecodeString(env.Payload)
	raw[len(raw)/2] ^= 0x01
	env.Payload = base64.StdEncoding.EncodeToString(raw)
	flipped, _ := json.Marshal(env)
	flippedPath := writeFile(t, dir, "flipped.json", string(flipped))

	// A byte of the base64 text flipped so it is no longer strict base64.
	text := readFile(t, signed)
	i := bytes.Index(text, []byte(`"payload": "`)) + len(`"payload": "`) + 5
	text[i] = '!'
	brokenPath := writeFile(t, dir, "broken.json", string(text))

	// An inference envelope signed by the same key: wrong payloadType.
	inf := filepath.Join(dir, "inference.signed.json")
	std().run(t, "inference", "sign", "--key", kp.private, "--in", contrib(t, "inference.json"), "--out", inf).want(t, ExitOK, nil, nil)

	// Expired: a valid window that lies in the past.
	old := strings.NewReplacer("2026-11-29T00:00:00Z", "2020-01-01T00:00:00Z", "2027-11-29T00:00:00Z", "2021-01-01T00:00:00Z").Replace(payload)
	h := std()
	expired := signCatalog(t, h, kp, old, "expired.json")
	// Not yet valid: issued an hour after the clock.
	future := strings.NewReplacer("2026-11-29T00:00:00Z", testNow.Add(time.Hour).Format(time.RFC3339)).Replace(payload)
	notYet := signCatalog(t, std(), kp, future, "future.json")

	cases := []struct {
		name, catalog, key string
		code               int
		rule               string
	}{
		{"flipped payload byte", flippedPath, kp.public, ExitRefused, `rule "signature"`},
		{"flipped base64 byte", brokenPath, kp.public, ExitRefused, `rule "format"`},
		{"wrong key", signed, other.public, ExitRefused, `rule "signature"`},
		{"expired", expired, kp.public, ExitRefused, `rule "expired"`},
		{"not yet valid", notYet, kp.public, ExitRefused, `rule "not_yet_valid"`},
		{"wrong payload type", inf, kp.public, ExitRefused, `rule "payload_type"`},
		{"unsigned payload", contrib(t, "catalog.json"), kp.public, ExitRefused, `rule "format"`},
		{"missing file", filepath.Join(dir, "nope.json"), kp.public, ExitUsage, `rule "missing"`},
		{"bad key text", signed, "zz", ExitUsage, "read trusted key zz"},
		{"key file holds a private key line of wrong shape", signed, writeFile(t, dir, "k.hex", "not hex\n"), ExitUsage, "read trusted key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			std().run(t, "catalog", "inspect", "--catalog", tc.catalog, "--trusted-key", tc.key).want(t, tc.code, nil, []string{"gensee: catalog inspect: ", tc.rule})
		})
	}
}

func TestCatalogSignRefusesInvalidPayload(t *testing.T) {
	kp := keys(t)
	dir := t.TempDir()
	payload := strings.Replace(string(readFile(t, contrib(t, "catalog.json"))), `"ip": "192.0.2.10"`, `"ip": "example.com"`, 1)
	in := writeFile(t, dir, "payload.json", payload)
	out := filepath.Join(dir, "out.json")
	r := std().run(t, "catalog", "sign", "--key", kp.private, "--in", in, "--out", out)
	r.want(t, ExitRefused, nil, []string{`contracts.allow-exact.network.allow[0].ip: "example.com" is a hostname`, "is invalid"})
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("an envelope was written for an invalid payload: %v", err)
	}

	std().run(t, "catalog", "sign", "--key", kp.private, "--in", in, "--out", in).want(t, ExitUsage, nil, []string{"is the --in file"})
	std().run(t, "catalog", "sign", "--key", kp.public+".nope", "--in", in, "--out", out).want(t, ExitUsage, nil, []string{"read private key"})
}

func TestCatalogSignWarnsExpiredAndLooseKey(t *testing.T) {
	kp := keys(t)
	if err := os.Chmod(kp.private, 0o644); err != nil {
		t.Fatal(err)
	}
	old := strings.NewReplacer("2026-11-29T00:00:00Z", "2020-01-01T00:00:00Z", "2027-11-29T00:00:00Z", "2021-01-01T00:00:00Z").Replace(string(readFile(t, contrib(t, "catalog.json"))))
	dir := t.TempDir()
	in := writeFile(t, dir, "p.json", old)
	std().run(t, "catalog", "sign", "--key", kp.private, "--in", in, "--out", "-").want(t, ExitOK,
		[]string{`"payloadType": "application/vnd.gensee.catalog.v1+json"`}, []string{"warning: catalog version 1 expired", "warning: private key", "chmod 0600"})
}

func TestSignedEnvelopeVerifiesWithSpec(t *testing.T) {
	kp := keys(t)
	signed := signCatalog(t, std(), kp, string(readFile(t, contrib(t, "catalog.json"))), "c.json")
	pub, _ := spec.ParsePublicKeyHex(string(readFile(t, kp.public)))
	c, err := spec.OpenCatalog(readFile(t, signed), []ed25519.PublicKey{pub}, 1)
	if err != nil {
		t.Fatalf("spec.OpenCatalog: %v", err)
	}
	if c.Version != 1 {
		t.Errorf("version %d", c.Version)
	}
}

func TestCatalogInspectFindsCatalogByOperatorConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the operator config must be root-owned")
	}
	kp := keys(t)
	signed := signCatalog(t, std(), kp, string(readFile(t, contrib(t, "catalog.json"))), "catalog.signed.json")
	cfg := writeFile(t, t.TempDir(), "config.toml", "catalog = \""+signed+"\"\n")

	std().run(t, "catalog", "inspect", "--config", cfg, "--trusted-key", kp.public).want(t, ExitOK, []string{signed, "ci-builds"}, nil)
	h := std()
	h.env = map[string]string{"GENSEE_CONFIG": cfg}
	h.run(t, "catalog", "inspect", "--trusted-key", kp.public).want(t, ExitOK, []string{signed}, nil)
	h.env = map[string]string{"GENSEE_CONFIG": cfg + ".missing"}
	h.run(t, "catalog", "inspect", "--trusted-key", kp.public).want(t, ExitUsage, nil, []string{"load operator config", "GENSEE_CONFIG"})
	std().run(t, "catalog", "inspect", "--config", cfg, "--catalog", signed, "--trusted-key", kp.public).want(t, ExitUsage, nil, []string{"exclude each other"})
}

// TestCatalogInspectNoVerifiers: a catalog without verifiers stays valid,
// and inspect says that no receipt is accepted under it.
func TestCatalogInspectNoVerifiers(t *testing.T) {
	kp := keys(t)
	payload := string(readFile(t, contrib(t, "catalog.json")))
	i := strings.Index(payload, `,
  "verifiers"`)
	if i < 0 {
		t.Fatal("the example catalog has no verifiers to remove")
	}
	payload = payload[:i] + "\n}\n"
	signed := signCatalog(t, std(), kp, payload, "catalog.signed.json")
	std().run(t, "catalog", "inspect", "--catalog", signed, "--trusted-key", kp.public).want(t, ExitOK,
		[]string{"VERIFIERS", "none: gensee promote accepts no receipt under this catalog"}, nil)
}
