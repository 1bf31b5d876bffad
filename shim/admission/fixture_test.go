package admission

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

const rt = "io.containerd.gensee.v2"

var (
	factsBuilds = Facts{ContainerdNamespace: "builds", Runtime: rt} // selector with safe_default
	factsStrict = Facts{ContainerdNamespace: "strict", Runtime: rt} // selector without
	factsTeamA  = Facts{ContainerdNamespace: "k8s.io", Runtime: rt, K8sNamespace: "team-a"}
)

// fixture is a validated catalog with two analyzers, the runtime's
// observation, and the clock.
type fixture struct {
	cat    *spec.Catalog
	ref    ed25519.PrivateKey // ref-analyzer's signing key
	other  ed25519.PrivateKey // other-analyzer's signing key
	obs    spec.Observation
	obsDig string
	now    time.Time
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
	fx := &fixture{ref: genKey(t), other: genKey(t), now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	deny := spec.Network{Mode: spec.NetworkDenyAll}
	fx.cat = &spec.Catalog{
		Schema: spec.SchemaCatalog, Version: 3,
		IssuedAt: fx.now.Add(-24 * time.Hour), ExpiresAt: fx.now.Add(365 * 24 * time.Hour),
		Contracts: map[string]spec.Contract{
			"offline":  {ID: "offline", Version: 1, Network: deny, Workspace: "/workspace"},
			"readonly": {ID: "readonly", Version: 2, Network: deny},
		},
		Analyzers: []spec.Analyzer{
			{ID: "ref-analyzer", Models: []string{"ref-model-1"}, PublicKey: pubHex(fx.ref),
				Classes: []string{"build", "fetch", "lint"}, MinConfidenceBP: 8000, MinMarginBP: 500, MaxLifetime: "1h"},
			{ID: "other-analyzer", Models: []string{"m2"}, PublicKey: pubHex(fx.other),
				Classes: []string{"build", "fetch"}, MinConfidenceBP: 5000, MinMarginBP: 0, MaxLifetime: "10m"},
		},
		Selectors: []spec.Selector{
			{ID: "ci-builds", Match: spec.SelectorMatch{ContainerdNamespace: "builds", Runtime: rt},
				Routes: map[string]string{"build": "offline", "fetch": "offline"}, SafeDefault: "readonly"},
			{ID: "strict", Match: spec.SelectorMatch{ContainerdNamespace: "strict", Runtime: rt},
				Routes: map[string]string{"build": "offline"}},
			{ID: "pods-a", Match: spec.SelectorMatch{ContainerdNamespace: "k8s.io", Runtime: rt, K8sNamespace: "team-a"},
				Routes: map[string]string{"build": "offline"}},
			{ID: "k8s-any", Match: spec.SelectorMatch{ContainerdNamespace: "k8s.io"},
				Routes: map[string]string{"build": "offline"}},
			{ID: "pods-c", Match: spec.SelectorMatch{K8sNamespace: "team-c"},
				Routes: map[string]string{"build": "offline"}},
		},
	}
	if err := fx.cat.Validate(); err != nil {
		t.Fatalf("fixture catalog does not validate: %v", err)
	}
	fx.obs = spec.Observation{Schema: spec.SchemaObservation, UID: 1000, GID: 1000,
		ExecutableSHA256: hex.EncodeToString(make([]byte, 32)), CommandDigest: "sha256:" + hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}
	var err error
	if fx.obsDig, err = fx.obs.Digest(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// inference returns a valid ref-analyzer inference for fx.obs, changed by mut.
func (fx *fixture) inference(mut func(*spec.Inference)) *spec.Inference {
	in := &spec.Inference{
		Schema: spec.SchemaInference, Analyzer: "ref-analyzer", Model: "ref-model-1", ObservationDigest: fx.obsDig,
		Candidates: []spec.Candidate{{Class: "build", ConfidenceBP: 9300}, {Class: "fetch", ConfidenceBP: 400}},
		IssuedAt:   fx.now.Add(-time.Minute), ExpiresAt: fx.now.Add(30 * time.Minute),
	}
	if mut != nil {
		mut(in)
	}
	return in
}

// signed returns the annotation text of payload (any JSON value) signed by key.
func signed(t testing.TB, payloadType string, payload any, key ed25519.PrivateKey) []byte {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	env, err := spec.SignEnvelope(payloadType, b, key)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// env is a ref-analyzer-signed inference annotation changed by mut.
func (fx *fixture) env(t testing.TB, mut func(*spec.Inference)) []byte {
	return signed(t, spec.PayloadTypeInference, fx.inference(mut), fx.ref)
}

func (fx *fixture) input(f Facts, env []byte) Input {
	return Input{Catalog: fx.cat, CatalogVersion: fx.cat.Version, Facts: f, InferenceEnvelope: env, Observation: fx.obs, Now: fx.now}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
