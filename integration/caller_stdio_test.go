package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loggerScript is a binary:// logger (containerd's protocol: stdout on
// fd 3, stderr on fd 4, fd 5 closed when ready) appending both to $1.
const loggerScript = `#!/bin/sh
exec 5>&-
cat <&3 >>"$1" &
cat <&4 >>"$1"
wait
`

// logURI returns a binary:// stdio URI that appends the container's output
// to path, through a logger the operator config allowlists (file:// is
// refused: the runtime would write any host path as root).
func (e *env) logURI(t *testing.T, path string) string {
	t.Helper()
	logger := filepath.Join(e.dir, "logger.sh")
	if _, err := os.Stat(logger); err != nil {
		must(t, os.WriteFile(logger, []byte(loggerScript), 0o755))
		e.writeOperatorConfig(fmt.Sprintf("logger_allowlist = [%q]\n", logger))
	}
	return "binary://" + logger + "?" + path
}

// TestCallerStdio: a file:// log URI and a logger binary the operator did
// not allowlist are refused at Create and at Exec, and the binary never
// runs; an allowlisted logger works (issue 25, item 3).
func TestCallerStdio(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	pwned := filepath.Join(e.dir, "pwned")
	e.refusedWith(t, "it-hostile", "touch", "stdio_uri", []string{"--log-uri", "binary:///usr/bin/touch?" + pwned}, "/bin/true")
	e.refusedWith(t, "it-hostile", "file", "stdio_uri", []string{"--log-uri", "file://" + pwned}, "/bin/echo", "x")
	if _, err := os.Stat(pwned); err == nil {
		t.Fatalf("%s exists: the refused stdio ran or was opened", pwned)
	}
	logPath := filepath.Join(e.dir, "ok.log")
	if out, code := e.run("it-hostile", "logged", []string{"--log-uri", e.logURI(t, logPath)}, "/bin/echo", "logged-line"); code != 0 {
		t.Fatalf("allowlisted logger: exit %d\n%s", code, out)
	}
	if b, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(b), "logged-line") {
		t.Fatalf("allowlisted logger wrote %q, %v", b, err)
	}
	ns := e.ns("it-hostile")
	e.ctr(ns, "run", "-d", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "ex", "/bin/sleep", "300")
	t.Cleanup(func() {
		e.ctrErr(ns, "tasks", "kill", "-s", "SIGKILL", "ex")
		waitStopped(e, ns, "ex")
		e.ctrErr(ns, "tasks", "delete", "ex")
		e.ctrErr(ns, "containers", "delete", "ex")
	})
	for _, uri := range []string{"file://" + pwned, "binary:///usr/bin/touch?" + pwned} {
		if out, err := e.ctrErr(ns, "tasks", "exec", "--exec-id", "x", "--log-uri", uri, "ex", "/bin/echo", "x"); err == nil || !strings.Contains(out, "stdio_uri") {
			t.Fatalf("exec --log-uri %s: %v, want stdio_uri\n%s", uri, err, out)
		}
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatalf("%s exists after the refused execs", pwned)
	}
}
