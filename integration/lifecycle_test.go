package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

func lifecycleCatalog() spec.Catalog {
	short := denyAll("short")
	short.Deadline = "2s"
	return catalogOf([]spec.Contract{denyAll("offline"), short},
		selector("it-life", map[string]string{"build": "offline"}, "offline"),
		selector("it-deadline", map[string]string{"build": "short"}, "short"))
}

// TestCapabilities: NET_RAW is removed (no AF_PACKET inside), boundary-
// defeating capabilities are refused.
func TestCapabilities(t *testing.T) {
	e := startEnv(t, lifecycleCatalog())
	out, code := e.run("it-life", "packet", nil, "/bin/probe", "packet")
	if code != 1 || !strings.Contains(out, "operation not permitted") {
		t.Fatalf("AF_PACKET: exit %d, want EPERM\n%s", code, out)
	}
	rec := e.admissionRecord("it-life", "packet")
	if caps, _ := rec["capabilities_removed"].([]any); len(caps) == 0 {
		t.Fatalf("admission record does not say NET_RAW was removed: %v", rec["capabilities_removed"])
	}
	for _, flags := range [][]string{{"--cap-add", "CAP_NET_ADMIN"}, {"--cap-add", "CAP_SYS_ADMIN"}, {"--privileged"}} {
		out, code := e.run("it-life", "capped", flags, "/bin/true")
		if code == 0 || !strings.Contains(out, "refused_capability") {
			t.Fatalf("%v: exit %d, want refused_capability\n%s", flags, code, out)
		}
	}
}

// TestLifecycle: exec, pause/resume, metrics, kill and delete work through
// the wrapper; `ctr run --rm` exits with the workload's status.
func TestLifecycle(t *testing.T) {
	e := startEnv(t, lifecycleCatalog())
	if _, code := e.run("it-life", "status", nil, "/bin/sh", "-c", "exit 7"); code != 7 {
		t.Fatalf("ctr run --rm exit %d, want 7", code)
	}
	ns := e.ns("it-life")
	// -t: a terminal through the wrapper (script(1) gives ctr a pty).
	tty := exec.Command("script", "-qec", strings.Join([]string{filepath.Join(e.bin, "ctr"), "--address", e.sock, "--namespace", ns,
		"run", "--rm", "-t", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "tty", "/bin/sh", "-c", "'test -t 0 && echo on-a-tty'"}, " "), "/dev/null")
	if out, err := tty.CombinedOutput(); err != nil || !strings.Contains(string(out), "on-a-tty") {
		t.Fatalf("ctr run -t: %v\n%s", err, out)
	}
	logPath := filepath.Join(e.dir, "life.log")
	e.ctr(ns, "run", "-d", "--log-uri", e.logURI(t, logPath), "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "life",
		"/bin/sh", "-c", "echo logged-line; exec /bin/sleep 300")
	if out := e.ctr(ns, "tasks", "exec", "--exec-id", "e1", "life", "/bin/echo", "hello"); !strings.Contains(out, "hello") {
		t.Fatalf("exec output %q", out)
	}
	e.ctr(ns, "tasks", "pause", "life")
	if out := e.ctr(ns, "tasks", "ls"); !strings.Contains(lineOf(out, "life"), "PAUSED") {
		t.Fatalf("after pause: %s", out)
	}
	e.ctr(ns, "tasks", "resume", "life")
	if out := e.ctr(ns, "tasks", "metrics", "life"); !strings.Contains(out, "ID") {
		t.Fatalf("metrics: %s", out)
	}
	if b, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(b), "logged-line") {
		t.Fatalf("container log %s: %q, %v", logPath, b, err)
	}
	e.ctr(ns, "tasks", "kill", "-s", "SIGKILL", "life")
	waitStopped(e, ns, "life")
	e.ctr(ns, "tasks", "delete", "life")
	e.ctr(ns, "containers", "delete", "life")
	if m := e.manifest(ns, "life"); m.Enforcement.Network.TableRemoved != "with_netns" {
		t.Fatalf("table removal after exit: %q", m.Enforcement.Network.TableRemoved)
	}
}

// TestDeadline: the contract deadline kills the task and is recorded.
func TestDeadline(t *testing.T) {
	e := startEnv(t, lifecycleCatalog())
	start := time.Now()
	_, code := e.run("it-deadline", "late", nil, "/bin/sleep", "60")
	if took := time.Since(start); took > 30*time.Second || code == 0 {
		t.Fatalf("deadline run took %s exit %d", took, code)
	}
	if m := e.manifest("it-deadline", "late"); !m.Deadlines.Exceeded {
		t.Fatalf("deadline not recorded: %+v", m.Deadlines)
	}
}

// TestShimKilled: after a SIGKILLed shim, containerd's cleanup (`shim
// delete`) removes the table the dead shim left in the host netns.
func TestShimKilled(t *testing.T) {
	e := startEnv(t, lifecycleCatalog())
	ns := e.ns("it-life")
	e.ctr(ns, "run", "-d", "--net-host", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "victim", "/bin/sleep", "300")
	op := e.operation(ns, "victim")
	if len(hostTables()) == 0 {
		t.Fatalf("no gensee table in the host netns while the --net-host task runs")
	}
	pid := shimPID(t, e, "victim")
	// The front started it from the file it opened and checked
	// (fsafe.ExecLink): named gensee-shim, that binary, no fd of it kept.
	want, _ := filepath.EvalSymlinks(filepath.Join(e.bin, "gensee-shim"))
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); strings.TrimSpace(string(comm)) != "gensee-shim" || exe != want {
		t.Errorf("the long-lived shim runs %s named %q, want %s named gensee-shim", exe, comm, want)
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == want {
			t.Errorf("the long-lived shim holds fd %s of its own binary", fd.Name())
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(20 * time.Second)
	for len(hostTables()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("table still installed 20s after the shim died: %v", hostTables())
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.ctrErr(ns, "tasks", "delete", "-f", "victim")
	e.ctrErr(ns, "containers", "delete", "victim")
	if _, err := os.Stat(filepath.Join(e.state, "operations", op, "cleaned")); err != nil {
		t.Fatalf("cleanup did not mark the operation: %v", err)
	}
}

// shimPID finds the shim process serving container id.
func shimPID(t *testing.T, e *env, id string) int {
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cl := string(b)
		if strings.Contains(cl, "gensee-shim") && strings.Contains(cl, e.sock) && strings.Contains(cl, "\x00"+id+"\x00") {
			pid, _ := strconv.Atoi(en.Name())
			return pid
		}
	}
	out, _ := exec.Command("ps", "axww").Output()
	t.Fatalf("no shim process for %s\n%s", id, out)
	return 0
}
