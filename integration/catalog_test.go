package integration

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

const runtimeName = "io.containerd.gensee.v2"

func denyAll(id string) spec.Contract {
	return spec.Contract{ID: id, Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}}
}

func analyzer() spec.Analyzer {
	return spec.Analyzer{ID: "ref-analyzer", Models: []string{"ref-model-1"}, Classes: []string{"build", "fetch", "deploy"},
		MinConfidenceBP: 8000, MinMarginBP: 500, MaxLifetime: "1h"}
}

// selector routes namespace ns; safeDefault may be empty.
func selector(ns string, routes map[string]string, safeDefault string) spec.Selector {
	return spec.Selector{ID: "sel-" + ns, Match: spec.SelectorMatch{ContainerdNamespace: ns, Runtime: runtimeName},
		Routes: routes, SafeDefault: safeDefault}
}

func catalogOf(contracts []spec.Contract, selectors ...spec.Selector) spec.Catalog {
	m := map[string]spec.Contract{}
	for _, c := range contracts {
		m[c.ID] = c
	}
	return spec.Catalog{Contracts: m, Analyzers: []spec.Analyzer{analyzer()}, Selectors: selectors}
}

// observation is what the runtime will derive for the test image running
// args with env (ctr's spec: the image env, cwd "/").
func (e *env) observation(args, env []string) spec.Observation {
	e.t.Helper()
	exe := args[0]
	b, err := os.ReadFile(filepath.Join(e.dir, strings.TrimPrefix(exe, "/bin/")))
	if err != nil {
		e.t.Fatalf("observation: only /bin/probe is hashed by the test: %v", err)
	}
	sum := sha256.Sum256(b)
	cd, err := observe.CommandDigest(args, env, "/")
	must(e.t, err)
	return spec.Observation{Schema: spec.SchemaObservation, ExecutableSHA256: hex.EncodeToString(sum[:]), CommandDigest: cd}
}

// inference signs an inference for obs with the analyzer key (or key, if set).
func (e *env) inference(obs spec.Observation, mutate func(*spec.Inference), key ed25519.PrivateKey) string {
	e.t.Helper()
	d, err := obs.Digest()
	must(e.t, err)
	now := time.Now().UTC().Truncate(time.Second)
	inf := spec.Inference{Schema: spec.SchemaInference, Analyzer: "ref-analyzer", Model: "ref-model-1", ObservationDigest: d,
		Candidates: []spec.Candidate{{Class: "build", ConfidenceBP: 9300}, {Class: "fetch", ConfidenceBP: 400}},
		IssuedAt:   now.Add(-time.Minute), ExpiresAt: now.Add(30 * time.Minute)}
	if mutate != nil {
		mutate(&inf)
	}
	payload, err := json.Marshal(inf)
	must(e.t, err)
	if key == nil {
		key = e.anKey
	}
	envl, err := spec.SignEnvelope(spec.PayloadTypeInference, payload, key)
	must(e.t, err)
	out, err := json.Marshal(envl)
	must(e.t, err)
	return string(out)
}

// operation returns the operation id recorded for ns/id.
func (e *env) operation(ns, id string) string {
	e.t.Helper()
	op, err := record.Store{Dir: e.state}.Lookup(ns, id)
	must(e.t, err)
	return op
}

// admissionRecord reads admission.json of ns/id.
func (e *env) admissionRecord(ns, id string) map[string]any {
	e.t.Helper()
	var m map[string]any
	must(e.t, record.Store{Dir: e.state}.ReadJSON(e.operation(ns, id), record.AdmissionFile, &m))
	return m
}
