package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

// gateAtLimit is the operator config line that makes every gate reach its
// limit at once.
const gateAtLimit = "gate_timeout = \"1ns\"\n"

// requireLimitVerdict: a gate that reached its limit is a failed verdict
// that names the limit and the setting that raises it, whichever door ran
// it (engine.Finish.runGate words it for all three).
func requireLimitVerdict(t *testing.T, door string, m *spec.Manifest) {
	t.Helper()
	if m == nil {
		t.Fatalf("%s: no manifest", door)
	}
	g := m.Gate
	if g.Verdict != spec.VerdictFail || len(g.Violations) != 1 || g.Violations[0].Rule != "gate_error" ||
		!strings.Contains(g.Violations[0].Detail, "the product gate reached its limit 1ns (gate_timeout)") {
		t.Fatalf("%s: gate %+v, want a failed verdict naming the limit and gate_timeout", door, g)
	}
	t.Logf("%s: %s", door, g.Violations[0].Detail)
	if product(*m, "out/result.json") != nil {
		t.Fatalf("%s: a product listed from a gate that did not finish", door)
	}
}

const gateLimitScript = "mkdir -p {ws}/out && printf '{}' > {ws}/out/result.json"

// TestGateLimitShim: a real container whose gate reaches gate_timeout.
func TestGateLimitShim(t *testing.T) {
	e := startEnv(t, catalogOf([]spec.Contract{productsContract()}, selector("it-gatelimit", nil, "products")))
	e.writeOperatorConfig(gateAtLimit)
	if out, code := e.run("it-gatelimit", "limit", nil, "/bin/sh", "-c", strings.ReplaceAll(gateLimitScript, "{ws}", "/workspace")); code != 0 {
		t.Fatalf("ctr run: exit %d\n%s", code, out)
	}
	m := e.manifest("it-gatelimit", "limit")
	requireLimitVerdict(t, "containerd", &m)
}

// TestGateLimitHooks: a podman container (the OCI hook) whose gate reaches
// gate_timeout.
func TestGateLimitHooks(t *testing.T) {
	c := denyAll("products")
	c.Workspace = "/workspace"
	c.Products = []spec.Product{{Class: spec.ClassStructuredResult, Slot: "out/result.json", MaxBytes: 65536, Modes: []string{"0644"}}}
	p := startPodman(t, c)
	p.e.writeOperatorConfig(fmt.Sprintf("writable_bind_roots = [%q, %q]\n",
		filepath.Join(p.e.dir, "storage", "overlay-containers"), filepath.Join(p.e.dir, "run", "overlay-containers")) + gateAtLimit)
	if out, code := p.run("limit", []string{"--network=none"}, "/bin/sh", "-c", strings.ReplaceAll(gateLimitScript, "{ws}", "/workspace")); code != 0 {
		t.Fatalf("podman run: exit %d\n%s", code, out)
	}
	_, m := p.lastOperation(t)
	p.finishedAtPoststop(t, m)
	requireLimitVerdict(t, "hooks", m)
}

// TestGateLimitHostRun: `gensee boundary run` whose gate reaches
// gate_timeout: the failed gate's status, 123.
func TestGateLimitHostRun(t *testing.T) {
	h := startRunEnv(t, resultContract())
	h.writeOperatorConfig(gateAtLimit)
	r := h.run(hostNobody, []string{"--workspace", h.workspace(nil)}, "sh", "-c", strings.ReplaceAll(gateLimitScript, "{ws}", "."))
	if r.code != 123 {
		t.Fatalf("exit %d, want 123 (a failed gate)\n%s", r.code, r.stderr)
	}
	requireLimitVerdict(t, "hostrun", r.manifest)
}
