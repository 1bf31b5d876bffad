package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// The kernel tests apply a filter or a Landlock domain in a child: this test
// binary re-executed with childEnv set, which runs one probe set on one
// locked thread and prints each probe's result as JSON. The same probes run
// in a control child without the sandbox, so a test can tell a refusal by
// the sandbox from one the kernel makes anyway (the tests may run as root or
// not).
const childEnv = "GENSEE_SANDBOX_TEST_CHILD"

// childConfig is what the parent hands the child, JSON in childEnv.
type childConfig struct {
	Sandbox  string // "seccomp", "landlock" or "" (control)
	Landlock Landlock
	Probes   string // "seccomp" or "landlock"
	Env      probeEnv
}

// probeEnv is what the landlock probes act on, made by the parent.
type probeEnv struct {
	Inside, Outside, OutsideFile string
	Abstract                     string
	AllowedPort, DeniedPort      int
	Parent                       int
}

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(runChild(v))
	}
	os.Exit(m.Run())
}

// result is "ok" or the errno's name.
func result(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

func runChild(v string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	runtime.LockOSThread() // never unlocked: the thread dies with the child
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "no_new_privs:", err)
		return 2
	}
	out := map[string]any{}
	switch cfg.Sandbox {
	case "seccomp":
		prog, err := HostFilter()
		if err == nil {
			err = InstallFilter(prog)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "filter:", err)
			return 2
		}
	case "landlock":
		applied, err := cfg.Landlock.Restrict()
		if err != nil {
			fmt.Fprintln(os.Stderr, "landlock:", err)
			return 2
		}
		out["applied"] = applied
	}
	results := map[string]string{}
	probes := seccompProbes()
	if cfg.Probes == "landlock" {
		probes = landlockProbes(cfg.Env)
	}
	for name, p := range probes {
		results[name] = result(p())
	}
	out["results"] = results
	b, _ := json.Marshal(out)
	os.Stdout.Write(b)
	return 0
}

// childOutput is what a child printed.
type childOutput struct {
	Applied Applied
	Results map[string]string
}

// runProbes runs cfg in a child and returns what it printed.
func runProbes(t *testing.T, cfg childConfig) childOutput {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	var stderr []byte
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		stderr = ee.Stderr
	}
	if err != nil {
		t.Fatalf("child %q: %v: %s", cfg.Sandbox, err, stderr)
	}
	var res childOutput
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child %q output %q: %v", cfg.Sandbox, out, err)
	}
	return res
}

// check compares a sandboxed child's results with want, and logs the probes
// whose control result is the same (the kernel refused without the sandbox
// too, so here they show nothing about it).
func check(t *testing.T, got, control map[string]string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("probe %s did not run", name)
		case g != w:
			t.Errorf("probe %s: got %s, want %s (without the sandbox: %s)", name, g, w, control[name])
		case control[name] == g && (w == "EPERM" || w == "EACCES" || w == "ENOSYS"):
			t.Logf("probe %s: %s without the sandbox too; not discriminating on this host", name, g)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("probe %s has no expectation", name)
		}
	}
}
