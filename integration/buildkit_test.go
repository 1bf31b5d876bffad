package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

// bkDockerfile is a FROM scratch build with busybox as its shell and one
// RUN step running script.
func bkDockerfile(script string) string {
	return "FROM scratch\nCOPY busybox /bin/busybox\nCOPY Dockerfile /etc/Dockerfile\n" +
		"SHELL [\"/bin/busybox\", \"sh\", \"-c\"]\nRUN " + script + "\n"
}

// bkCatalog routes every RUN step of the worker's namespace to c, the
// selector's safe_default: BuildKit cannot annotate a RUN container, so no
// inference reaches admission.
func bkCatalog(c spec.Contract) spec.Catalog {
	return catalogOf([]spec.Contract{c}, selector(bkNamespace, nil, c.ID))
}

func bkResultContract(id string) spec.Contract {
	c := denyAll(id)
	c.Workspace = "/out"
	c.Products = []spec.Product{{Class: spec.ClassStructuredResult, Slot: "result.json", MaxBytes: 65536}}
	return c
}

// gateViolation returns the manifest's first violation with rule.
func gateViolation(m spec.Manifest, rule string) *spec.Violation {
	for i := range m.Gate.Violations {
		if m.Gate.Violations[i].Rule == rule {
			return &m.Gate.Violations[i]
		}
	}
	return nil
}

// TestBuildKit drives BuildKit's containerd worker (contrib/buildkit) over
// the integration containerd: every RUN step is one operation of the
// runtime, admitted under the selector's safe_default, confined by its
// table in the host netns and gated at exit from the step's overlay
// upperdir; gate_failed_exit_status fails the step.
func TestBuildKit(t *testing.T) {
	e := startEnv(t, bkCatalog(denyAll("bk-offline")))
	ln, addr := hostListener(t)
	bk := startBuildkitd(e)
	strict := bkResultContract("bk-strict")
	strict.Unclaimed = spec.UnclaimedFail

	t.Run("loopback denied", func(t *testing.T) {
		r := bk.build("deny", bkDockerfile(fmt.Sprintf("/bin/busybox nc -w 2 %s </dev/null", strings.Replace(addr, ":", " ", 1))))
		if r.err == nil {
			t.Fatalf("the step reached %s and the build succeeded:\n%s", addr, r.out)
		}
		if n := ln.accepted.Load(); n != 0 {
			t.Fatalf("the loopback server accepted %d connections from a deny_all step", n)
		}
		if !strings.Contains(r.out, "nc: timed out") || !strings.Contains(r.out, "exit code: 1") {
			t.Errorf("build output does not show the denial the step saw (nc: timed out, exit code: 1):\n%s", r.out)
		}
		op := r.only(t)
		evs := r.events[op]
		denied := 0
		for _, ev := range evs {
			if ev.Kind == spec.EventEgressDenied && strings.Contains(ev.Target, addr) {
				denied++
			}
		}
		if denied == 0 {
			t.Fatalf("no egress_denied event for %s among %d events: %+v", addr, len(evs), evs)
		}
		m := bk.manifestOf(op)
		if n := m.Enforcement.Network; !strings.Contains(n.Scope, "host netns") || n.Status != "enforced" || n.TableRemoved != "deleted" {
			t.Errorf("network enforcement %+v, want the cgroup-bound table in the host netns, enforced, deleted", n)
		}
		if m.Namespace != bkNamespace || m.Contract.ID != "bk-offline" || !m.Inference.SafeDefault {
			t.Errorf("manifest namespace %q contract %q safe_default %v, want %s, bk-offline, true", m.Namespace, m.Contract.ID, m.Inference.SafeDefault, bkNamespace)
		}
		if m.ExitStatus != 1 {
			t.Errorf("manifest exit_status %d, want nc's 1", m.ExitStatus)
		}
	})

	// RUN --network=none: BuildKit gives the step a namespace of its own
	// (only lo); the table goes into it and fails closed.
	t.Run("own netns", func(t *testing.T) {
		r := bk.build("netnone", bkDockerfile(fmt.Sprintf("--network=none /bin/busybox nc -w 2 %s </dev/null", strings.Replace(addr, ":", " ", 1))))
		if r.err == nil || ln.accepted.Load() != 0 {
			t.Fatalf("a --network=none step reached the host's loopback (accepted %d):\n%s", ln.accepted.Load(), r.out)
		}
		n := bk.manifestOf(r.only(t)).Enforcement.Network
		if strings.Contains(n.Scope, "host netns") || n.TableRemoved != "with_netns" || n.Status != "enforced" {
			t.Fatalf("network enforcement %+v, want the step's own netns, table removed with it, enforced", n)
		}
	})

	t.Run("valid result passes", func(t *testing.T) {
		e.publish(bkCatalog(bkResultContract("bk-result")))
		result := `{"ok": true, "step": "result"}`
		r := bk.build("result", bkDockerfile("/bin/busybox mkdir -p /out && echo '"+result+"' > /out/result.json"))
		if r.err != nil {
			t.Fatalf("build failed: %v\n%s", r.err, r.out)
		}
		got, err := os.ReadFile(filepath.Join(r.dest, "out/result.json"))
		if err != nil || string(got) != result+"\n" {
			t.Fatalf("the image's /out/result.json = %q, %v", got, err)
		}
		m := bk.manifestOf(r.only(t))
		if m.Gate.Verdict != spec.VerdictPass {
			t.Fatalf("verdict %s, violations %+v", m.Gate.Verdict, m.Gate.Violations)
		}
		p := product(m, "result.json")
		if p == nil || p.SHA256 != hexSum([]byte(result+"\n")) || p.Verdict != spec.VerdictPass {
			t.Fatalf("product record %+v, want result.json passing with sha256 %s", p, hexSum([]byte(result+"\n")))
		}
		if m.Unclaimed.Count != 0 {
			t.Errorf("unclaimed %+v: BuildKit's mount stubs or the image's layers counted as changes", m.Unclaimed)
		}
	})

	// A slot an earlier layer already holds: the step's own upperdir decides,
	// so the earlier layer's file is not this step's product.
	t.Run("slot from an earlier layer", func(t *testing.T) {
		df := func(run string) string {
			return "FROM scratch\nCOPY busybox /bin/busybox\nCOPY result.json /out/result.json\n" +
				"SHELL [\"/bin/busybox\", \"sh\", \"-c\"]\nRUN " + run + "\n"
		}
		r := bk.buildWith("stale", df("/bin/busybox true"), map[string]string{"result.json": "{\"stale\": true}\n"})
		if r.err == nil {
			t.Fatalf("a step that did not write its product built:\n%s", r.out)
		}
		m := bk.manifestOf(r.only(t))
		if m.Gate.Verdict != spec.VerdictFail || len(m.Gate.Violations) == 0 || m.Gate.Violations[0].Slot != "result.json" {
			t.Fatalf("gate %+v, want result.json to fail", m.Gate)
		}
		r = bk.buildWith("rewrite", df("echo '{\"fresh\": true}' > /out/result.json"), map[string]string{"result.json": "{\"stale\": true}\n"})
		if r.err != nil {
			t.Fatalf("a step that rewrote its product failed: %v\n%s\n%+v", r.err, r.out, bk.manifestOf(r.only(t)).Gate)
		}
		if p := product(bk.manifestOf(r.only(t)), "result.json"); p == nil || p.SHA256 != hexSum([]byte("{\"fresh\": true}\n")) {
			t.Fatalf("product record %+v, want the rewritten file", p)
		}
	})

	t.Run("invalid json fails the step", func(t *testing.T) {
		r := bk.build("badjson", bkDockerfile("/bin/busybox mkdir -p /out && echo '{\"ok\": tru' > /out/result.json"))
		if r.err == nil {
			t.Fatalf("a step whose product fails the gate built:\n%s", r.out)
		}
		if !strings.Contains(r.out, "exit code: 86") {
			t.Errorf("build output does not carry gate_failed_exit_status 86:\n%s", r.out)
		}
		op := r.only(t)
		m := bk.manifestOf(op)
		if m.Gate.Verdict != spec.VerdictFail || gateViolation(m, "invalid_json") == nil {
			t.Fatalf("verdict %s violations %+v, want fail with invalid_json", m.Gate.Verdict, m.Gate.Violations)
		}
		if m.ExitStatus != 0 {
			t.Errorf("manifest exit_status %d, want the workload's own 0", m.ExitStatus)
		}
		if countKind(r.events[op], spec.EventGateRejected, "invalid_json") == 0 {
			t.Errorf("no gate_rejected invalid_json event: %+v", r.events[op])
		}
	})

	t.Run("unclaimed fail", func(t *testing.T) {
		e.publish(bkCatalog(strict))
		write := "/bin/busybox mkdir -p /out && echo '{}' > /out/result.json"
		// Only the product: BuildKit's stubs (/dev, /proc, /sys, /etc/hosts,
		// /etc/resolv.conf) are mount destinations, not changes.
		r := bk.build("strict-ok", bkDockerfile(write))
		if r.err != nil {
			t.Fatalf("a step that wrote only its product failed: %v\n%s\nmanifest gate %+v", r.err, r.out, bk.manifestOf(r.only(t)).Gate)
		}
		// A write outside the declared paths.
		r = bk.build("strict-stray", bkDockerfile(write+" && echo x > /stray"))
		if r.err == nil || !strings.Contains(r.out, "exit code: 86") {
			t.Fatalf("a step that wrote outside its products built (err %v):\n%s", r.err, r.out)
		}
		m := bk.manifestOf(r.only(t))
		if v := gateViolation(m, "unclaimed_change"); v == nil || v.Path != "/stray" {
			t.Fatalf("violations %+v, want unclaimed_change at /stray", m.Gate.Violations)
		}
		if p := product(m, "result.json"); p == nil || p.Verdict != spec.VerdictPass {
			t.Errorf("the product itself should still pass: %+v", p)
		}
		// A deletion of an earlier layer's file: only the step's upperdir
		// (found from the mount table, not the merged bind) shows it.
		r = bk.build("strict-delete", bkDockerfile(write+" && /bin/busybox rm /etc/Dockerfile"))
		if r.err == nil {
			t.Fatalf("a step that deleted an image file built:\n%s", r.out)
		}
		m = bk.manifestOf(r.only(t))
		if v := gateViolation(m, "unclaimed_change"); v == nil || v.Path != "/etc/Dockerfile" || !strings.HasPrefix(v.Detail, "delete") {
			t.Fatalf("violations %+v, want unclaimed_change delete of /etc/Dockerfile", m.Gate.Violations)
		}
	})

	t.Run("nothing left behind", func(t *testing.T) {
		bk.stop()
		if t.Failed() {
			return
		}
		if left := bk.leftovers(); len(left) > 0 {
			t.Fatalf("left after the builds: %v", left)
		}
	})
}
