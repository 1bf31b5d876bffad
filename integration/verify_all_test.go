package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// TestManifestVerifyAllAndRetention: product_mismatch without a person.
// Two containers stage a structured result; one staged copy is then
// tampered with. gensee manifest verify --all (what the systemd timer
// runs) exits 1, names the tampered operation, verifies the intact one and
// raises product_mismatch. Once a person cleared that finding, retention
// past max_age re-hashes before it removes: it removes the intact
// operation, keeps the tampered one, names the finding and raises it again.
func TestManifestVerifyAllAndRetention(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	e.writeOperatorConfig("[retention]\nmax_age = \"1s\"\n")
	script := "mkdir -p /workspace/out && echo '{\"ok\":true}' > /workspace/out/result.json"
	for _, id := range []string{"intact", "tampered"} {
		if out, code := e.run("it-hgate", id, nil, "/bin/sh", "-c", script); code != 0 {
			t.Fatalf("%s: exit %d\n%s", id, code, out)
		}
	}
	intact, tampered := e.operation("it-hgate", "intact"), e.operation("it-hgate", "tampered")
	must(t, os.WriteFile(e.stagedPath("it-hgate", "tampered", "out/result.json"), []byte("{\"ok\":false}\n"), 0o644))
	gensee := func(args ...string) (string, int) {
		out, err := exec.Command(filepath.Join(e.bin, "gensee"), append(args, "--config", e.cfgPath)...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		must(t, err)
		return string(out), 0
	}

	out, code := gensee("manifest", "verify", "--all")
	if code != 1 || !strings.Contains(out, "operation "+tampered+" (it-hgate/tampered): 2 problem(s)") ||
		!strings.Contains(out, "operation "+intact+" (it-hgate/intact): verified: ") {
		t.Fatalf("verify --all: exit %d, want 1 naming both operations\n%s", code, out)
	}
	if n := countKind(e.events("it-hgate", "tampered"), spec.EventProductMismatch, ""); n != 1 {
		t.Fatalf("%d product_mismatch events after verify --all, want 1:\n%s", n, out)
	}
	if a, ok := e.attention("it-hgate", "tampered"); !ok || len(a.Open()) != 1 || a.Open()[0].Signature != "product_mismatch" {
		t.Fatalf("attention %+v (set %v), want one open product_mismatch", a, ok)
	}
	if _, ok := e.attention("it-hgate", "intact"); ok {
		t.Fatal("the intact operation got attention")
	}
	if out, code := gensee("manifest", "verify", "--all"); code != 1 || !strings.Contains(out, "already has attention") {
		t.Fatalf("second verify --all: exit %d, want 1 and nothing raised again\n%s", code, out)
	}
	if out, code := gensee("attention", "clear", "--operation", tampered, "--note", "the test looked"); code != 0 {
		t.Fatalf("attention clear: exit %d\n%s", code, out)
	}

	time.Sleep(1100 * time.Millisecond) // past max_age
	out, code = gensee("prune")
	if code != 0 || !strings.Contains(out, "kept "+tampered+" (it-hgate/tampered): 2 problems in its staged products (out/result.json)") ||
		!strings.Contains(out, "product_mismatch raised") || !strings.Contains(out, intact) {
		t.Fatalf("prune: exit %d, want the intact operation removed and the tampered one kept, naming the finding\n%s", code, out)
	}
	st := record.Store{Dir: e.state}
	for id, want := range map[string]bool{intact: false, tampered: true} {
		dir, err := st.OperationDir(id)
		must(t, err)
		if _, err := os.Lstat(dir); (err == nil) != want {
			t.Errorf("operation %s present %v after prune, want %v", id, err == nil, want)
		}
	}
	if a, ok := e.attention("it-hgate", "tampered"); !ok || len(a.Findings) != 2 || len(a.Open()) != 1 || a.Open()[0].Signature != "product_mismatch" {
		t.Fatalf("attention after prune %+v, want the cleared finding and a new open product_mismatch", a)
	}
	if out, _ := gensee("prune", "--dry-run"); strings.Contains(out, tampered) {
		t.Errorf("the next prune would remove the tampered operation:\n%s", out)
	}
}
