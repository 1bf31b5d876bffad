// Package roottest gates tests that need root and the real kernel (nftables,
// cgroup v2, overlay mounts, containerd). They run when GENSEE_ROOT_TESTS=1,
// which `make test` sets; asked for without root they fail loudly rather than
// pass vacuously.
package roottest

import (
	"os"
	"testing"
)

// Env is the variable that turns root tests on.
const Env = "GENSEE_ROOT_TESTS"

// Require skips t unless root tests were asked for, and fails it when they
// were asked for but the process is not root.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Skipf("root test: set %s=1 and run as root (make test does)", Env)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("root test asked for (%s=1) but euid is %d: run as root", Env, os.Geteuid())
	}
}
