package cli

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

func analyzerKeys(t *testing.T) keyPair {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "analyzer")
	std().run(t, "inference", "keygen", "--out", dir).want(t, ExitOK, []string{"analyzers[].public_key: "}, nil)
	return pairIn(dir, "analyzer")
}

// catalogFor returns the contrib catalog with the analyzer's key in it.
func catalogFor(t *testing.T, kp keyPair) *spec.Catalog {
	t.Helper()
	pub := strings.TrimSpace(string(readFile(t, kp.public)))
	text := strings.Replace(string(readFile(t, contrib(t, "catalog.json"))), strings.Repeat("0", 64), pub, 1)
	c, err := spec.ParseCatalog([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestInferenceSignRoundTrip(t *testing.T) {
	kp := analyzerKeys(t)
	out := filepath.Join(t.TempDir(), "inference.signed.json")
	std().run(t, "inference", "sign", "--key", kp.private, "--in", contrib(t, "inference.json"), "--out", out).
		want(t, ExitOK, []string{"signed inference by ref-analyzer/ref-model-1", "top build 9300 bp"}, nil)

	env := mustEnvelope(t, out)
	if env.PayloadType != spec.PayloadTypeInference {
		t.Errorf("payloadType %q", env.PayloadType)
	}
	pub, _ := spec.ParsePublicKeyHex(string(readFile(t, kp.public)))
	payload, err := env.Verify(spec.PayloadTypeInference, []ed25519.PublicKey{pub}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(payload) != string(readFile(t, contrib(t, "inference.json"))) {
		t.Error("signed payload differs from the input bytes")
	}
	in, a, err := catalogFor(t, kp).OpenInference(readFile(t, out))
	if err != nil {
		t.Fatalf("catalog.OpenInference: %v", err)
	}
	if a.ID != "ref-analyzer" || in.Candidates[0].Class != "build" {
		t.Errorf("opened %+v by %s", in, a.ID)
	}
}

func TestInferenceSignRefusals(t *testing.T) {
	kp := analyzerKeys(t)
	dir := t.TempDir()
	cases := []struct {
		name, payload, line string
	}{
		{"unranked", strings.Replace(string(readFile(t, contrib(t, "inference.json"))), `"confidence_bp": 400`, `"confidence_bp": 9900`, 1), "candidates[1].confidence_bp: "},
		{"float confidence", strings.Replace(string(readFile(t, contrib(t, "inference.json"))), `9300`, `93.5`, 1), "candidates[0].confidence_bp: "},
		{"bad digest", strings.Replace(string(readFile(t, contrib(t, "inference.json"))), `sha256:0000`, `md5:0000`, 1), "observation_digest: "},
		{"catalog is not an inference", string(readFile(t, contrib(t, "catalog.json"))), "(document)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := writeFile(t, dir, "in.json", tc.payload)
			std().run(t, "inference", "sign", "--key", kp.private, "--in", in, "--out", filepath.Join(dir, "out.json")).
				want(t, ExitRefused, nil, []string{"is invalid"})
		})
	}
}

func observationFile(t *testing.T) (string, spec.Observation) {
	t.Helper()
	o := spec.Observation{Schema: spec.SchemaObservation, UID: 1000, GID: 1000,
		ExecutableSHA256: strings.Repeat("ab", 32), CommandDigest: "sha256:" + strings.Repeat("cd", 32)}
	b, _ := json.Marshal(o)
	return writeFile(t, t.TempDir(), "obs.json", string(b)), o
}

func TestInferenceMake(t *testing.T) {
	kp := analyzerKeys(t)
	obsPath, obs := observationFile(t)
	out := filepath.Join(t.TempDir(), "inf.json")
	std().run(t, "inference", "make", "--observation", obsPath, "--class", "build", "--confidence", "9300",
		"--class", "fetch", "--confidence", "400", "--ttl", "10m", "--key", kp.private, "--out", out).
		want(t, ExitOK, []string{"signed inference by ref-analyzer/ref-model-1", "expires 2027-01-01T12:10:00Z"}, nil)

	in, _, err := catalogFor(t, kp).OpenInference(readFile(t, out))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := obs.Digest()
	if in.ObservationDigest != want {
		t.Errorf("observation_digest %s, want %s", in.ObservationDigest, want)
	}
	if len(in.Candidates) != 2 || in.Candidates[1] != (spec.Candidate{Class: "fetch", ConfidenceBP: 400}) {
		t.Errorf("candidates %+v", in.Candidates)
	}
	if !in.IssuedAt.Equal(testNow) || in.ExpiresAt.Sub(in.IssuedAt) != 10*time.Minute {
		t.Errorf("window %s..%s", in.IssuedAt, in.ExpiresAt)
	}
	env := mustEnvelope(t, out)
	raw, _ := base64.StdEncoding.DecodeString(env.Payload)
	canon, _ := spec.CanonicalJSON(in)
	if string(raw) != string(canon) {
		t.Errorf("payload is not canonical JSON:\n%s\n%s", raw, canon)
	}
}

func TestInferenceMakeUsage(t *testing.T) {
	kp := analyzerKeys(t)
	obsPath, _ := observationFile(t)
	out := filepath.Join(t.TempDir(), "inf.json")
	base := []string{"inference", "make", "--observation", obsPath, "--key", kp.private, "--out", out}
	cases := []struct {
		name  string
		extra []string
		code  int
		msg   string
	}{
		{"no class", nil, ExitUsage, "--class is required"},
		{"unpaired", []string{"--class", "build"}, ExitUsage, "1 --class but 0 --confidence"},
		{"not a number", []string{"--class", "build", "--confidence", "high"}, ExitUsage, `--confidence "high"`},
		{"out of range", []string{"--class", "build", "--confidence", "10001"}, ExitUsage, "0-10000"},
		{"bad ttl", []string{"--class", "build", "--confidence", "9000", "--ttl", "-1m"}, ExitUsage, "must be positive"},
		{"unranked", []string{"--class", "a", "--confidence", "10", "--class", "b", "--confidence", "20"}, ExitRefused, "candidates[1].confidence_bp"},
		{"bad analyzer id", []string{"--class", "build", "--confidence", "9000", "--analyzer", "bad id"}, ExitRefused, "analyzer: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			std().run(t, append(append([]string{}, base...), tc.extra...)...).want(t, tc.code, nil, []string{tc.msg})
		})
	}
	bad := writeFile(t, t.TempDir(), "obs.json", `{"schema":"gensee.observation/v1","uid":0,"gid":0,"executable_sha256":"x","command_digest":"y"}`)
	std().run(t, "inference", "make", "--observation", bad, "--class", "build", "--confidence", "9000", "--key", kp.private, "--out", out).
		want(t, ExitRefused, nil, []string{"executable_sha256: ", "command_digest: "})
}
