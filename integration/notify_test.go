package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/notify"
	"github.com/gensee/gensee/spec"
)

// notifyScript writes a notify command in dir that saves the JSON it reads
// on stdin as one file per run under dir/notified, and returns the
// operator config line naming it.
func notifyScript(t *testing.T, dir string) (configLine, outDir string) {
	t.Helper()
	outDir = filepath.Join(dir, "notified")
	must(t, os.MkdirAll(outDir, 0o700))
	sh := filepath.Join(dir, "notify.sh")
	must(t, os.WriteFile(sh, []byte("#!/bin/sh\ncat > \"$1/.$$\" && mv \"$1/.$$\" \"$1/$$.json\"\n"), 0o755))
	return fmt.Sprintf("notify_command = [%q, %q]\n", sh, outDir), outDir
}

// notified waits (10 s at most) for the notify command to have saved a
// payload with signature sig, and returns it.
func notified(t *testing.T, outDir, sig string) notify.Payload {
	t.Helper()
	var got notify.Payload
	waitFor(t, 10*time.Second, "the notify command to receive a "+sig+" finding on stdin", func() bool {
		ents, _ := os.ReadDir(outDir)
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(outDir, e.Name()))
			if err != nil {
				continue
			}
			var p notify.Payload
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatalf("the notify command read no JSON object: %v: %s", err, b)
			}
			if p.Signature == sig {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// checkPayload checks the parts of p every door fills.
func checkPayload(t *testing.T, p notify.Payload, opID, containerID, runtime string) {
	t.Helper()
	if p.OperationID != opID || p.ContainerID != containerID || p.Runtime != runtime {
		t.Errorf("payload names operation %q container %q runtime %q, want %q %q %q",
			p.OperationID, p.ContainerID, p.Runtime, opID, containerID, runtime)
	}
	if p.Detail == "" || p.At.IsZero() || time.Since(p.At) > 5*time.Minute || len(p.Evidence) == 0 {
		t.Errorf("payload lacks detail, time or evidence: %+v", p)
	}
}

// TestNotifyShim: the containerd shim runs notify_command with the
// finding on stdin when the host flushes a running task's table; the task
// keeps running.
func TestNotifyShim(t *testing.T) {
	e := startEnv(t, eventsCatalog())
	line, out := notifyScript(t, e.dir)
	e.writeOperatorConfig(line)
	n := newTestNet(t)
	e.runDetached("it-ev", "notify", n.ClientPath, "/bin/sleep", "300")
	adm := e.admissionRecord("it-ev", "notify")
	time.Sleep(300 * time.Millisecond) // the watcher's first read
	nftIn(t, n, "flush", "table", "inet", adm["table"].(string))
	p := notified(t, out, "table_tampered")
	checkPayload(t, p, adm["operation_id"].(string), "notify", "io.containerd.gensee.v2")
	if o := e.ctr("it-ev", "tasks", "ls"); !strings.Contains(lineOf(o, "notify"), "RUNNING") {
		t.Fatalf("the task did not keep running:\n%s", o)
	}
}

// TestNotifyHooks: the OCI hook's monitor runs notify_command with the
// finding on stdin when the host flushes a running container's table.
func TestNotifyHooks(t *testing.T) {
	p := startPodman(t, denyAll("deny"))
	line, out := notifyScript(t, p.e.dir)
	p.e.writeOperatorConfig(fmt.Sprintf("writable_bind_roots = [%q, %q]\n",
		filepath.Join(p.e.dir, "storage", "overlay-containers"), filepath.Join(p.e.dir, "run", "overlay-containers")) + line)
	id, mk := p.runDetached(t, "notify")
	time.Sleep(300 * time.Millisecond) // the watcher's first read
	if o, err := exec.Command("nft", "flush", "table", "inet", mk.Table).CombinedOutput(); err != nil {
		t.Fatalf("nft flush table %s: %v\n%s", mk.Table, err, o)
	}
	got := notified(t, out, "table_tampered")
	checkPayload(t, got, mk.OperationID, id, "oci-hooks")
	p.podman("stop", "--time", "0", "notify")
	p.podman("rm", "notify")
	p.finishedAtPoststop(t, p.manifestOf(id))
}

// TestNotifyHostRun: `gensee boundary run` runs notify_command (as root,
// as the run's parent runs) with the finding on stdin when the host
// flushes the run's table; the command's exit status stays its own.
func TestNotifyHostRun(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	line, out := notifyScript(t, h.dir)
	h.writeOperatorConfig(line)
	ws := h.workspace(nil)
	done := make(chan string, 1)
	go func() {
		tableRE := regexp.MustCompile(`table inet (gensee_[0-9a-f]+)`)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			o, _ := exec.Command("nft", "list", "tables").Output()
			m := tableRE.FindStringSubmatch(string(o))
			if m == nil {
				continue
			}
			time.Sleep(300 * time.Millisecond) // the watcher's first read
			if o, err := exec.Command("nft", "flush", "table", "inet", m[1]).CombinedOutput(); err != nil {
				done <- "flush: " + err.Error() + ": " + string(o)
				return
			}
			done <- ""
			return
		}
		done <- "no gensee table appeared"
	}()
	r := h.run(hostNobody, []string{"--workspace", ws}, "sh", "-c", "sleep 4; exit 7")
	if msg := <-done; msg != "" {
		t.Fatal(msg)
	}
	if r.code != 7 || r.manifest == nil {
		t.Fatalf("exit %d (want the command's 7), manifest %v: %s", r.code, r.manifest != nil, r.stderr)
	}
	p := notified(t, out, "table_tampered")
	checkPayload(t, p, r.manifest.OperationID, r.manifest.OperationID, "host")
}
