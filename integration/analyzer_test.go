package integration

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/hooks"
	"github.com/gensee/gensee/spec"
)

// The node analyzer (docs/design.md §3.1) through every door: the runtime
// asks `gensee analyzer serve` for the inference no caller attached.

// anClass is the class the reference analyzer's rules give, routed to a
// contract other than the selector's safe_default.
const anClass = "fetch"

// analyzerSel is a selector of containerd namespace ns asking the analyzer
// at sock, routing anClass to routed; safeDefault may be empty.
func analyzerSel(ns, sock, routed, safeDefault string) spec.Selector {
	s := selector(ns, map[string]string{anClass: routed}, safeDefault)
	s.Analyzer = &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: sock, Timeout: "500ms"}
	return s
}

// withRulesKey sets the rules key of the catalog's analyzer.
func withRulesKey(cat spec.Catalog, k ed25519.PrivateKey) spec.Catalog {
	for i := range cat.Analyzers {
		cat.Analyzers[i].RulesKey = strings.TrimSpace(spec.FormatPublicKeyHex(k.Public().(ed25519.PublicKey)))
	}
	return cat
}

// startAnalyzer runs `gensee analyzer serve` for the catalog analyzer
// ref-analyzer with rules signed by rulesKey, listening on sock, and stops
// it when the test ends.
func (e *env) startAnalyzer(sock string, rulesKey ed25519.PrivateKey, rules []spec.AnalyzerRule, hist *spec.HistoryPolicy) {
	e.t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	payload, err := json.Marshal(spec.AnalyzerRules{Schema: spec.SchemaAnalyzerRules, Analyzer: "ref-analyzer", Version: 1,
		IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour), Rules: rules, History: hist})
	must(e.t, err)
	envl, err := spec.SignEnvelope(spec.PayloadTypeAnalyzerRules, payload, rulesKey)
	must(e.t, err)
	b, err := json.Marshal(envl)
	must(e.t, err)
	rulesPath := filepath.Join(e.dir, "etc", "analyzer-rules.dsse.json")
	must(e.t, os.WriteFile(rulesPath, b, 0o600))
	keyPath := filepath.Join(e.dir, "etc", "analyzer-private-key.hex")
	must(e.t, os.WriteFile(keyPath, []byte(spec.FormatPrivateKeyHex(e.anKey)), 0o400))
	logf, err := os.Create(filepath.Join(e.dir, "analyzer.log"))
	must(e.t, err)
	cmd := exec.Command(filepath.Join(e.bin, "gensee"), "analyzer", "serve", "--config", e.cfgPath, "--id", "ref-analyzer",
		"--rules", rulesPath, "--key", keyPath, "--model", "ref-model-1", "--listen", sock)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(e.t, cmd.Start())
	e.t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if _, err := os.Lstat(sock); err == nil {
			e.t.Errorf("the analyzer left its socket %s behind", sock)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(e.dir, "analyzer.log"))
			e.t.Fatalf("gensee analyzer serve did not listen on %s:\n%s", sock, b)
		}
	}
}

// fakeAnalyzer serves answer on a unix socket at sock from the test
// process (a broken or lying analyzer: the runtime must not trust it more
// than its absence), and stops with the test.
func fakeAnalyzer(t *testing.T, sock string, answer func(spec.AnalyzerRequest) (spec.AnalyzerAnswer, time.Duration)) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var q spec.AnalyzerRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&q); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a, delay := answer(q)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		json.NewEncoder(w).Encode(a)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
		os.Remove(sock)
	})
}

// signedAnswer is an inference for q's observation naming class at
// 9500 bp, signed by key as analyzer "ref-analyzer".
func signedAnswer(t *testing.T, q spec.AnalyzerRequest, key ed25519.PrivateKey) spec.AnalyzerAnswer {
	now := time.Now().UTC().Truncate(time.Second)
	inf := spec.Inference{Schema: spec.SchemaInference, Analyzer: "ref-analyzer", Model: "ref-model-1", ObservationDigest: q.ObservationDigest,
		Candidates: []spec.Candidate{{Class: anClass, ConfidenceBP: 9500}}, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(10 * time.Minute)}
	payload, err := json.Marshal(inf)
	must(t, err)
	envl, err := spec.SignEnvelope(spec.PayloadTypeInference, payload, key)
	must(t, err)
	b, err := json.Marshal(envl)
	must(t, err)
	return spec.AnalyzerAnswer{Schema: spec.SchemaAnalyzerAnswer, Inference: b}
}

// sha256File is the hex sha256 of the host file path.
func sha256File(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	must(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// consultOf is the analyzer consult admission.json recorded (nil: none).
func consultOf(t *testing.T, adm map[string]any) *spec.AnalyzerConsult {
	raw, ok := adm["analyzer"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	must(t, err)
	var c spec.AnalyzerConsult
	must(t, json.Unmarshal(b, &c))
	return &c
}

// TestAnalyzerFallback: over ctr, a selector's analyzer that answers with
// its class admits under the routed contract; a slow, dead, wrong-key,
// lying or classless analyzer is "no inference": the safe_default with the
// consult recorded, or a refusal naming the analyzer and the fix.
func TestAnalyzerFallback(t *testing.T) {
	rulesKey, otherKey := newKey(t), newKey(t)
	sock := func(name string) string { return "/run/gensee-it-" + name + ".sock" }
	probeSHA := ""
	nsList := []string{"an-ok", "an-slow", "an-dead", "an-wrongkey", "an-lying", "an-garbage", "an-noclass", "an-strict", "an-annotated"}
	var sels []spec.Selector
	for _, ns := range nsList {
		safe := "offline"
		if ns == "an-strict" {
			safe = ""
		}
		s := sock(ns)
		if ns == "an-noclass" || ns == "an-strict" || ns == "an-annotated" {
			s = sock("an-ok")
		}
		if ns == "an-strict" {
			s = sock("an-dead")
		}
		sels = append(sels, analyzerSel(ns, s, "fetch-contract", safe))
	}
	fetch := denyAll("fetch-contract")
	fetch.Network.Loopback = spec.LoopbackAllow
	e := startEnv(t, withRulesKey(catalogOf([]spec.Contract{denyAll("offline"), fetch}, sels...), rulesKey))
	for _, ns := range nsList {
		os.Remove(sock(ns))
	}
	probeSHA = sha256File(t, filepath.Join(e.dir, "probe"))
	e.startAnalyzer(sock("an-ok"), rulesKey, []spec.AnalyzerRule{
		{ID: "probe-true", Class: anClass, ConfidenceBP: 9000, ExecutableSHA256: []string{probeSHA}, Argv: []string{"/bin/probe", "sleep", "*"}},
	}, nil)
	fakeAnalyzer(t, sock("an-slow"), func(q spec.AnalyzerRequest) (spec.AnalyzerAnswer, time.Duration) {
		return signedAnswer(t, q, e.anKey), 3 * time.Second
	})
	fakeAnalyzer(t, sock("an-wrongkey"), func(q spec.AnalyzerRequest) (spec.AnalyzerAnswer, time.Duration) {
		return signedAnswer(t, q, otherKey), 0
	})
	fakeAnalyzer(t, sock("an-lying"), func(q spec.AnalyzerRequest) (spec.AnalyzerAnswer, time.Duration) {
		q.ObservationDigest = "sha256:" + strings.Repeat("0", 64) // signed by the right key, for another observation
		return signedAnswer(t, q, e.anKey), 0
	})
	fakeAnalyzer(t, sock("an-garbage"), func(q spec.AnalyzerRequest) (spec.AnalyzerAnswer, time.Duration) {
		return spec.AnalyzerAnswer{Schema: "not-an-answer"}, 0
	})

	sleep0 := []string{"/bin/probe", "sleep", "0"}
	type want struct {
		ns, contract, outcome, fallback string
		args                            []string
	}
	for _, w := range []want{
		{"an-ok", "fetch-contract", spec.ConsultAnswered, "", sleep0},
		{"an-slow", "offline", spec.ConsultTimeout, "analyzer_unavailable", sleep0},
		{"an-dead", "offline", spec.ConsultUnreachable, "analyzer_unavailable", sleep0},
		{"an-wrongkey", "offline", spec.ConsultRejected, "bad_signature", sleep0},
		{"an-lying", "offline", spec.ConsultRejected, "observation_mismatch", sleep0},
		{"an-garbage", "offline", spec.ConsultMalformed, "analyzer_unavailable", sleep0},
		{"an-noclass", "offline", spec.ConsultNoClass, "analyzer_no_class", []string{"/bin/busybox", "true"}},
	} {
		t.Run(w.ns, func(t *testing.T) {
			id := "c-" + w.ns
			start := time.Now()
			out, code := e.run(w.ns, id, nil, w.args...)
			took := time.Since(start)
			if code != 0 {
				t.Fatalf("ctr run in %s: exit %d\n%s", w.ns, code, out)
			}
			adm := e.admissionRecord(w.ns, id)
			c := consultOf(t, adm)
			if adm["contract_id"] != w.contract || c == nil || c.Outcome != w.outcome || c.Analyzer != "ref-analyzer" {
				t.Fatalf("%s: contract %v, consult %+v; want contract %s, outcome %s", w.ns, adm["contract_id"], c, w.contract, w.outcome)
			}
			if got, _ := adm["fallback_from"].(string); got != w.fallback {
				t.Errorf("%s: fallback_from %q, want %q", w.ns, got, w.fallback)
			}
			if w.ns == "an-slow" && (c.TookMicros < 400_000 || took > 20*time.Second) {
				t.Errorf("a slow analyzer: consult took %d us (timeout 500ms), run %s", c.TookMicros, took)
			}
			m := e.manifest(w.ns, id)
			if m.Contract.ID != w.contract || m.Inference.SafeDefault != (w.fallback != "") {
				t.Errorf("%s: manifest contract %s, inference %+v", w.ns, m.Contract.ID, m.Inference)
			}
		})
	}

	t.Run("no safe_default refuses", func(t *testing.T) {
		out, code := e.run("an-strict", "c-strict", nil, "/bin/probe", "true")
		if code == 0 || !strings.Contains(out, "analyzer_unavailable") || !strings.Contains(out, sock("an-dead")) {
			t.Fatalf("ctr run under a dead analyzer and no safe_default: exit %d, want a refusal naming analyzer_unavailable and the socket:\n%s", code, out)
		}
	})

	t.Run("an attached inference is not overridden", func(t *testing.T) {
		args := sleep0
		bad := e.inference(e.observation(args, hostEnv(t)), nil, otherKey)
		out, code := e.run("an-annotated", "c-annotated", []string{"--annotation", "io.gensee.boundary.inference=" + bad}, args...)
		if code == 0 || !strings.Contains(out, "bad_signature") {
			t.Fatalf("a bad annotation with an analyzer on the selector: exit %d, want bad_signature refusal:\n%s", code, out)
		}
	})
}

// deploymentVolatile is what a Kubernetes selector leaves out: CRI's
// HOSTNAME and the kubelet's Service links.
var deploymentVolatile = []string{"HOSTNAME", "*_SERVICE_HOST", "*_SERVICE_PORT", "*_SERVICE_PORT_*", "*_PORT", "*_PORT_*"}

// TestAnalyzerCRIDeployment: two pods shaped like replicas of one
// Deployment (generated names as HOSTNAME, Service link variables with
// different values, no inference annotation) get the same stable
// observation and are admitted under the class's contract, not the
// safe_default, through the node analyzer.
func TestAnalyzerCRIDeployment(t *testing.T) {
	rulesKey := newKey(t)
	sock := "/run/gensee-it-cri-analyzer.sock"
	os.Remove(sock)
	web := denyAll("web")
	web.Network.Loopback = spec.LoopbackAllow
	sel := spec.Selector{ID: "team-a", Match: spec.SelectorMatch{ContainerdNamespace: criNS, Runtime: runtimeName, K8sNamespace: "team-a"},
		Routes: map[string]string{anClass: "web"}, SafeDefault: "offline",
		Analyzer:    &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: sock, Timeout: "500ms"},
		VolatileEnv: deploymentVolatile}
	e := startCRI(t, withRulesKey(catalogOf([]spec.Contract{denyAll("offline"), web}, sel), rulesKey))
	probeSHA := sha256File(t, filepath.Join(e.dir, "probe"))
	e.startAnalyzer(sock, rulesKey, []spec.AnalyzerRule{
		{ID: "web-server", Class: anClass, ConfidenceBP: 9000, ExecutableSHA256: []string{probeSHA}, Argv: []string{"/bin/probe", "sleep", "*"}},
	}, &spec.HistoryPolicy{PerRunBP: 100, MaxBP: 500})

	replicas := []struct {
		pod string
		env map[string]string
	}{
		{"web-7d9f8c6b5-x2lqp", map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
			"KUBERNETES_PORT": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1", "API_SERVICE_HOST": "10.96.3.7",
			"API_SERVICE_PORT_HTTP": "8080", "MODE": "serve"}},
		{"web-7d9f8c6b5-k8wzt", map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
			"KUBERNETES_PORT": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1", "API_SERVICE_HOST": "10.96.9.12",
			"API_SERVICE_PORT_HTTP": "8081", "MODE": "serve"}},
	}
	var digests []string
	for _, r := range replicas {
		podCfg := e.podConfig(r.pod, "team-a", nil)
		podID := e.runp(podCfg)
		ctrCfg := e.containerConfig("web", []string{"/bin/probe", "sleep", "60"}, nil)
		setJSON(t, ctrCfg, func(m map[string]any) {
			// A hostNetwork pod (no CNI here) has the node's UTS
			// namespace, so CRI's HOSTNAME would be the node's: the
			// container's own HOSTNAME (which CRI lets override it)
			// stands in for the pod name CRI sets on a pod network.
			envs := []map[string]string{{"key": "HOSTNAME", "value": r.pod}}
			for k, v := range r.env {
				envs = append(envs, map[string]string{"key": k, "value": v})
			}
			m["envs"] = envs
		})
		id := e.createStart(podID, podCfg, ctrCfg)
		adm := e.admissionRecord(criNS, id)
		c := consultOf(t, adm)
		if adm["contract_id"] != "web" || adm["safe_default"] != false || c == nil || c.Outcome != spec.ConsultAnswered {
			t.Fatalf("replica %s: contract %v safe_default %v consult %+v; want contract web through the analyzer", r.pod, adm["contract_id"], adm["safe_default"], c)
		}
		obs, _ := adm["observation"].(map[string]any)
		left := fmt.Sprint(obs["volatile_env"])
		for _, n := range []string{"HOSTNAME", "API_SERVICE_HOST", "API_SERVICE_PORT_HTTP", "KUBERNETES_PORT_443_TCP_ADDR"} {
			if !strings.Contains(left, n) {
				t.Errorf("replica %s: observation.volatile_env %s lacks %s", r.pod, left, n)
			}
		}
		if strings.Contains(left, "PATH") || strings.Contains(left, "MODE") {
			t.Errorf("replica %s: observation.volatile_env %s left out a variable no entry lists", r.pod, left)
		}
		digests = append(digests, fmt.Sprint(adm["observation_digest"]))
		if s := e.containerSpec(id); !slices.Contains(s.Process.Env, "HOSTNAME="+r.pod) {
			t.Errorf("replica %s: CRI's env %q has no HOSTNAME=%s", r.pod, s.Process.Env, r.pod)
		}
	}
	if digests[0] != digests[1] {
		t.Fatalf("two replicas of one Deployment have observations %s and %s; want one stable observation", digests[0], digests[1])
	}
}

// setJSON rewrites the JSON object in path with edit.
func setJSON(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(b, &m))
	edit(m)
	b, err = json.Marshal(m)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o600))
}

// TestAnalyzerBuildKit: a BuildKit RUN step, which carries no annotation,
// gets its class from the node analyzer and runs under the class's
// contract.
func TestAnalyzerBuildKit(t *testing.T) {
	rulesKey := newKey(t)
	sock := "/run/gensee-it-bk-analyzer.sock"
	os.Remove(sock)
	fetch := bkResultContract("bk-fetch")
	sel := analyzerSel(bkNamespace, sock, "bk-fetch", "bk-offline")
	e := startEnv(t, withRulesKey(catalogOf([]spec.Contract{denyAll("bk-offline"), fetch}, sel), rulesKey))
	e.startAnalyzer(sock, rulesKey, []spec.AnalyzerRule{
		{ID: "busybox-sh", Class: anClass, ConfidenceBP: 9000, ExecutableSHA256: []string{sha256File(t, "/bin/busybox")},
			Argv: []string{"/bin/busybox", "sh", "-c", "**"}},
	}, nil)
	bk := startBuildkitd(e)
	r := bk.build("analyzer", bkDockerfile(`mkdir -p /out && echo '{"ok":true}' >/out/result.json`))
	if r.err != nil {
		t.Fatalf("build: %v\n%s", r.err, r.out)
	}
	op := r.only(t)
	m := bk.manifestOf(op)
	if m.Contract.ID != "bk-fetch" || m.Inference.SafeDefault || m.Inference.Class != anClass || m.Inference.Analyzer != "ref-analyzer" {
		t.Fatalf("RUN step manifest: contract %s, inference %+v; want bk-fetch through the analyzer's class %s", m.Contract.ID, m.Inference, anClass)
	}
}

// TestAnalyzerHostRun: a host run gets its class from the node analyzer.
func TestAnalyzerHostRun(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	rulesKey := newKey(t)
	sock := "/run/gensee-it-host-analyzer.sock"
	os.Remove(sock)
	classed := spec.Contract{ID: "host-classed", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}, Deadline: "2m"}
	def := spec.Contract{ID: "host-contract", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}, Deadline: "2m"}
	cat := spec.Catalog{
		Contracts: map[string]spec.Contract{classed.ID: classed, def.ID: def},
		Analyzers: []spec.Analyzer{analyzer()},
		Selectors: []spec.Selector{{ID: "host-nobody", Match: spec.SelectorMatch{Runtime: "host", User: "nobody"},
			Routes: map[string]string{anClass: classed.ID}, SafeDefault: def.ID,
			Analyzer: &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: sock, Timeout: "500ms"}}},
	}
	h.publish(withRulesKey(cat, rulesKey))
	h.startAnalyzer(sock, rulesKey, []spec.AnalyzerRule{
		{ID: "true", Class: anClass, ConfidenceBP: 9000, ExecutableSHA256: []string{sha256File(t, "/bin/true")}, Argv: []string{"/bin/true"}},
	}, nil)
	res := h.run("nobody", []string{"--workspace", h.workspace(nil)}, "/bin/true")
	if res.code != 0 || res.manifest == nil {
		t.Fatalf("boundary run /bin/true: exit %d, manifest %v\n%s", res.code, res.manifest != nil, res.stderr)
	}
	if m := res.manifest; m.Contract.ID != classed.ID || m.Inference.SafeDefault || m.Inference.Class != anClass {
		t.Fatalf("host run manifest: contract %s, inference %+v; want %s through the analyzer", m.Contract.ID, m.Inference, classed.ID)
	}
	// A command no rule names falls back to the safe_default, recorded.
	res = h.run("nobody", []string{"--workspace", h.workspace(nil)}, "/bin/sh", "-c", "true")
	if res.code != 0 || res.manifest == nil || res.manifest.Contract.ID != def.ID || !res.manifest.Inference.SafeDefault {
		t.Fatalf("boundary run of an unruled command: exit %d, manifest %+v\n%s", res.code, res.manifest, res.stderr)
	}
	// The ruled command with a loader variable the rule does not pin is
	// not classified (the red team's "rules met by attacker-chosen code"):
	// the safe_default governs, and the manifest says the analyzer named
	// no class.
	res = h.run("nobody", []string{"--workspace", h.workspace(nil), "--env", "LD_PRELOAD=/nonexistent/x.so"}, "/bin/true")
	if res.manifest == nil || res.manifest.Contract.ID != def.ID || !res.manifest.Inference.SafeDefault ||
		res.manifest.Inference.AnalyzerOutcome != spec.ConsultNoClass {
		t.Fatalf("boundary run of /bin/true with LD_PRELOAD: exit %d, manifest %+v\n%s", res.code, res.manifest, res.stderr)
	}
}

// TestAnalyzerHooks: a podman container through the OCI hook, which sees
// no inference from a Dockerfile or a podman command line, gets its class
// from the node analyzer.
func TestAnalyzerHooks(t *testing.T) {
	p := startPodman(t, denyAll("hooked"))
	rulesKey := newKey(t)
	sock := "/run/gensee-it-hooks-analyzer.sock"
	os.Remove(sock)
	classed := loopbackOK("hook-classed")
	cat := catalogOf([]spec.Contract{denyAll("hooked"), classed}, spec.Selector{ID: "sel-hooks",
		Match: spec.SelectorMatch{Runtime: hooks.Runtime}, SafeDefault: "hooked", Routes: map[string]string{anClass: classed.ID},
		Analyzer: &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: sock, Timeout: "500ms"}})
	p.e.publish(withRulesKey(cat, rulesKey))
	p.e.startAnalyzer(sock, rulesKey, []spec.AnalyzerRule{
		{ID: "probe-sleep", Class: anClass, ConfidenceBP: 9000, ExecutableSHA256: []string{sha256File(t, filepath.Join(p.e.dir, "probe"))},
			Argv: []string{"/bin/probe", "sleep", "*"}},
	}, nil)
	if out, code := p.run("classed", []string{"--network=host"}, "/bin/probe", "sleep", "0"); code != 0 {
		t.Fatalf("podman run: exit %d\n%s", code, out)
	}
	_, m := p.lastOperation(t)
	if m.Contract.ID != classed.ID || m.Inference.SafeDefault || m.Inference.Class != anClass {
		t.Fatalf("hooked container manifest: contract %s, inference %+v; want %s through the analyzer", m.Contract.ID, m.Inference, classed.ID)
	}
	if out, code := p.run("unruled", []string{"--network=host"}, "/bin/busybox", "true"); code != 0 {
		t.Fatalf("podman run of an unruled command: exit %d\n%s", code, out)
	}
	if _, m = p.lastOperation(t); m.Contract.ID != "hooked" || !m.Inference.SafeDefault || m.Inference.AnalyzerOutcome != spec.ConsultNoClass {
		t.Fatalf("unruled container manifest: contract %s, inference %+v; want the safe_default after no_class", m.Contract.ID, m.Inference)
	}
}
