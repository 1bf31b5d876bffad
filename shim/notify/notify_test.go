package notify

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/spec"
)

// script writes an executable shell script in dir and returns its path.
func script(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "notify.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

var finding = spec.Finding{Signature: "table_tampered", Detail: "table gensee_x flushed",
	At:       time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	Evidence: []spec.Event{{Kind: spec.EventControlDefeat, Control: "watchdog", Detail: "flushed"}}}

// TestFindingPayload: a real process reads the finding as one JSON object
// on stdin and in its environment; Finding returns before it ran.
func TestFindingPayload(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	sh := script(t, dir, `sleep 0.2; cat > "$1.tmp"; env | grep ^GENSEE_ > "$1.env"; mv "$1.tmp" "$1"`+"\n")
	n := New(Config{Argv: []string{sh, out}, OperationID: "op-1", ContainerID: "ctr-1", Runtime: "oci-hooks"})
	start := time.Now()
	n.Finding(finding)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("Finding blocked %s", d)
	}
	Wait()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var p Payload
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("stdin is not one JSON object: %v: %s", err, b)
	}
	want := Payload{OperationID: "op-1", ContainerID: "ctr-1", Runtime: "oci-hooks", Signature: "table_tampered",
		Detail: finding.Detail, At: finding.At, Evidence: finding.Evidence}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Fatalf("payload %+v, want %+v", p, want)
	}
	env, _ := os.ReadFile(out + ".env")
	for _, kv := range []string{"GENSEE_OPERATION_ID=op-1", "GENSEE_CONTAINER_ID=ctr-1", "GENSEE_RUNTIME=oci-hooks",
		"GENSEE_SIGNATURE=table_tampered", "GENSEE_DETAIL=table gensee_x flushed"} {
		if !strings.Contains(string(env), kv+"\n") {
			t.Errorf("env lacks %s:\n%s", kv, env)
		}
	}
}

// TestTimeoutKillsGroup: at the deadline the command's whole process group
// is killed, a background child too, and the failure is only logged.
func TestTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	sh := script(t, dir, `sleep 30 & echo $! > "$1"; wait`+"\n")
	n := New(Config{Argv: []string{sh, pidFile}, OperationID: "op-2", Timeout: 300 * time.Millisecond})
	start := time.Now()
	n.Finding(finding)
	Wait()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the notifier ran %s past a 300ms deadline", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	waitFor(t, 2*time.Second, "the background child to be gone", func() bool {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ")
	})
}

// TestConcurrencyCap: past MaxInFlight running commands a notification is
// dropped, not queued; once they end, notifications run again.
func TestConcurrencyCap(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	runs := filepath.Join(dir, "runs")
	if err := os.Mkdir(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each run leaves a file named for its signature, then holds its slot
	// until the gate exists.
	sh := script(t, dir, `sig=$(cat | sed 's/.*"signature":"\([a-z_]*\)".*/\1/'); mktemp "$2/$sig.XXXXXX" >/dev/null; while [ ! -e "$1" ]; do sleep 0.02; done`+"\n")
	n := New(Config{Argv: []string{sh, gate, runs}, OperationID: "op-3", Logger: log.L})
	routine := spec.Finding{Signature: "deny_then_reach", Detail: "x", At: finding.At}
	for range MaxInFlight + MaxQueued {
		n.Finding(routine)
	}
	count := func(prefix string) int {
		ents, _ := os.ReadDir(runs)
		c := 0
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				c++
			}
		}
		return c
	}
	waitFor(t, 5*time.Second, "MaxInFlight runs", func() bool { return count("") == MaxInFlight })
	// The queue is full of routine findings: a graver one evicts the
	// newest of them and goes first; another routine one is dropped.
	n.Finding(finding) // table_tampered
	n.Finding(routine)
	// Real time: the commands are real processes, which no synctest
	// bubble holds, and this waits for something not to happen (a fifth
	// command starting), so the window is fixed; load can make it miss a
	// late start, never fail a cap that holds.
	time.Sleep(200 * time.Millisecond)
	if c := count(""); c != MaxInFlight {
		t.Fatalf("%d commands ran at once, want %d", c, MaxInFlight)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	Wait()
	if c, tt := count(""), count("table_tampered"); c != MaxInFlight+MaxQueued || tt != 1 {
		t.Fatalf("%d commands ran in all (%d table_tampered), want %d with the graver one", c, tt, MaxInFlight+MaxQueued)
	}
}

// TestNotRun: no notify_command, or a relative one, runs nothing.
func TestNotRun(t *testing.T) {
	var nilN *Notifier
	nilN.Finding(finding)
	New(Config{}).Finding(finding)
	dir := t.TempDir()
	t.Chdir(dir)
	script(t, dir, "touch ran\n")
	New(Config{Argv: []string{"./notify.sh"}}).Finding(finding)
	Wait()
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatalf("a relative notify_command ran")
	}
}
