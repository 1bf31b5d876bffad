package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// TestHostRunTableDrift: root adds an accept rule to a running host run's
// table; the table watcher sees it and the manifest's network status is
// drift_detected, with the drift listed, as for containers and hooks.
func TestHostRunTableDrift(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	ws := h.workspace(nil)
	done := make(chan string, 1)
	go func() {
		tableRE := regexp.MustCompile(`table inet (gensee_[0-9a-f]+)`)
		chainRE := regexp.MustCompile(`chain (\S+) \{`)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			out, _ := exec.Command("nft", "list", "tables").Output()
			m := tableRE.FindStringSubmatch(string(out))
			if m == nil {
				continue
			}
			body, err := exec.Command("nft", "list", "table", "inet", m[1]).Output()
			c := chainRE.FindStringSubmatch(string(body))
			if err != nil || c == nil {
				continue
			}
			if out, err := exec.Command("nft", "insert", "rule", "inet", m[1], c[1], "counter", "accept").CombinedOutput(); err != nil {
				done <- "insert: " + err.Error() + ": " + string(out)
				return
			}
			done <- ""
			return
		}
		done <- "no gensee table appeared"
	}()
	r := h.run(hostNobody, []string{"--workspace", ws}, "sleep", "3")
	if msg := <-done; msg != "" {
		t.Fatal(msg)
	}
	if r.manifest == nil {
		t.Fatalf("no manifest: exit %d, %s", r.code, r.stderr)
	}
	n := r.manifest.Enforcement.Network
	if n.Status != spec.NetworkDriftDetected || len(r.manifest.Observation.TableDrift) == 0 {
		t.Fatalf("network status %q, drift %q: want drift_detected with the drift listed", n.Status, r.manifest.Observation.TableDrift)
	}
	if !strings.Contains(strings.Join(r.manifest.Observation.TableDrift, " "), "accept") {
		t.Logf("drift listed: %q", r.manifest.Observation.TableDrift)
	}
}

// TestHostRunWorkspaceAsUser: a workspace under a directory the user
// cannot search is refused before anything runs (it is opened as the
// user), though root could open it.
func TestHostRunWorkspaceAsUser(t *testing.T) {
	h := startRunEnv(t, resultContract())
	private := filepath.Join(h.dir, "private")
	must(t, os.Mkdir(private, 0o700))
	ws := filepath.Join(private, "proj")
	must(t, os.Mkdir(ws, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("root-only\n"), 0o644))
	r := h.run(hostNobody, []string{"--workspace", ws}, "cat", "notes.txt")
	if r.code != 125 || strings.Contains(r.stdout, "root-only") || !strings.Contains(r.stderr, "cannot open") {
		t.Fatalf("exit %d (want 125), stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if r.manifest != nil {
		t.Fatalf("a manifest was written for a refused run")
	}
}
