package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

func productsContract() spec.Contract {
	c := denyAll("products")
	c.Workspace = "/workspace"
	c.Products = []spec.Product{
		{Class: spec.ClassStructuredResult, Slot: "out/result.json", MaxBytes: 65536, Modes: []string{"0644"}},
		{Class: spec.ClassBlobSet, Slot: "out/blobs", MaxEntries: 10, MaxBytes: 1 << 20},
	}
	return c
}

// manifest reads the operation's manifest, waiting (bounded) for the exit
// path to write it: `ctr tasks ls` shows a task stopped once runc's
// service has handled the init's exit, which the exit path runs beside.
func (e *env) manifest(ns, id string) spec.Manifest {
	e.t.Helper()
	st, op := record.Store{Dir: e.state}, e.operation(ns, id)
	var m spec.Manifest
	err := st.ReadJSON(op, record.ManifestFile, &m)
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, fs.ErrNotExist) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		err = st.ReadJSON(op, record.ManifestFile, &m)
	}
	must(e.t, err)
	return m
}

func (e *env) stagedPath(ns, id, rel string) string {
	dir, err := record.Store{Dir: e.state}.OperationDir(e.operation(ns, id))
	must(e.t, err)
	return filepath.Join(dir, record.StagedDir, rel)
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func product(m spec.Manifest, slot string) *spec.ProductRecord {
	for i := range m.Products {
		if m.Products[i].Slot == slot {
			return &m.Products[i]
		}
	}
	return nil
}

// TestProductGate: a real container's products are gated from the overlay
// diff at exit, staged with their sha256 in the manifest; a bad product
// fails the gate and is not staged.
func TestProductGate(t *testing.T) {
	e := startEnv(t, catalogOf([]spec.Contract{productsContract()},
		selector("it-gate", map[string]string{"build": "products"}, "products")))

	result := `{"ok": true, "n": 3}` + "\n"
	script := "mkdir -p /workspace/out/blobs && printf '%s' '" + result + "' > /workspace/out/result.json" +
		" && echo a > /workspace/out/blobs/a.txt && echo bb > /workspace/out/blobs/b.txt && echo stray > /workspace/stray.txt"
	if out, code := e.run("it-gate", "good", nil, "/bin/sh", "-c", script); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	m := e.manifest("it-gate", "good")
	if m.Gate.Verdict != spec.VerdictPass {
		t.Fatalf("verdict %s, violations %+v", m.Gate.Verdict, m.Gate.Violations)
	}
	if m.Promoted || m.SemanticallyVerified {
		t.Fatalf("manifest claims promotion or semantic verification")
	}
	res := product(m, "out/result.json")
	if res == nil || res.SHA256 != hexSum([]byte(result)) {
		t.Fatalf("result.json record %+v, want sha256 %s", res, hexSum([]byte(result)))
	}
	staged, err := os.ReadFile(e.stagedPath("it-gate", "good", "out/result.json"))
	if res.Staged != "staged/out/result.json" {
		t.Errorf("staged path recorded as %q", res.Staged)
	}
	if err != nil || string(staged) != result {
		t.Fatalf("staged result.json %q, %v", staged, err)
	}
	blobs := product(m, "out/blobs")
	if blobs == nil || len(blobs.Entries) != 2 {
		t.Fatalf("blob set record %+v", blobs)
	}
	for _, en := range blobs.Entries {
		want := map[string]string{"a.txt": "a\n", "b.txt": "bb\n"}[filepath.Base(en.Path)]
		if en.SHA256 != hexSum([]byte(want)) {
			t.Errorf("blob %s sha256 %s, want %s", en.Path, en.SHA256, hexSum([]byte(want)))
		}
		got, err := os.ReadFile(e.stagedPath("it-gate", "good", filepath.Join("out/blobs", filepath.Base(en.Path))))
		if err != nil || string(got) != want {
			t.Errorf("staged %s = %q, %v", en.Path, got, err)
		}
	}
	if m.Unclaimed.Count < 1 {
		t.Errorf("the stray file is not counted as unclaimed: %+v", m.Unclaimed)
	}

	// Invalid JSON: the gate fails, and nothing is staged for that slot.
	if out, code := e.run("it-gate", "bad", nil, "/bin/sh", "-c", "mkdir -p /workspace/out && echo '{\"ok\": tru' > /workspace/out/result.json"); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	m = e.manifest("it-gate", "bad")
	if m.Gate.Verdict != spec.VerdictFail || !hasRule(m, "invalid_json") {
		t.Fatalf("verdict %s violations %+v, want fail with invalid_json", m.Gate.Verdict, m.Gate.Violations)
	}
	if _, err := os.Stat(e.stagedPath("it-gate", "bad", "out/result.json")); !os.IsNotExist(err) {
		t.Fatalf("a failing product was staged (stat: %v)", err)
	}
}

func hasRule(m spec.Manifest, rule string) bool {
	for _, v := range m.Gate.Violations {
		if v.Rule == rule {
			return true
		}
	}
	return false
}

// TestGateDrainsCgroup: a process left in the container's cgroup when the
// init exits (one the pid namespace's teardown does not reach) is killed
// before the scan, and counted.
func TestGateDrainsCgroup(t *testing.T) {
	e := startEnv(t, catalogOf([]spec.Contract{productsContract()},
		selector("it-gate", map[string]string{"build": "products"}, "products")))
	ns := e.ns("it-gate")
	e.ctr(ns, "run", "-d", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "drain",
		"/bin/sh", "-c", "mkdir -p /workspace/out && echo '{}' > /workspace/out/result.json && sleep 3")
	defer func() {
		e.ctrErr(ns, "tasks", "delete", "-f", "drain")
		e.ctrErr(ns, "containers", "delete", "drain")
	}()
	sub := e.admissionRecord(ns, "drain")["subject"].(map[string]any)
	h, err := cgroup.Find()
	must(t, err)
	dir, err := h.Dir(sub["cgroup_path"].(string))
	must(t, err)
	stray := exec.Command("sleep", "300")
	must(t, stray.Start())
	defer stray.Process.Kill()
	must(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0o644))

	waited := make(chan error, 1)
	go func() { waited <- stray.Wait() }()
	select {
	case err := <-waited:
		ws, _ := stray.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("stray process ended with %v, want SIGKILL from the drain", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stray process still alive 30s after the task's init exited")
	}
	e.ctr(ns, "tasks", "delete", "drain")
	m := e.manifest(ns, "drain")
	if m.Drained < 1 {
		t.Fatalf("manifest drained = %d, want >= 1", m.Drained)
	}
	if m.Gate.Verdict != spec.VerdictFail && m.Gate.Verdict != spec.VerdictPass {
		t.Fatalf("gate verdict %q", m.Gate.Verdict)
	}
}
