// Package kerneltest holds the kernel fixtures of root tests: fresh network
// namespaces, test cgroups under the cgroup2 mount, and clients placed in a
// cgroup (at clone, before they run any code) and a namespace.
//
// It is only imported from _test.go files, after roottest.Require. Every
// fixture cleans up with t.Cleanup, pass or fail, and never touches a
// namespace or cgroup it did not create. What a test puts inside a fixture
// (a gensee table, probe clients of its own) stays in that test's package.
package kerneltest

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
)

// RandHex returns n random bytes in hex, for names no concurrent test
// reuses.
func RandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Run runs a command, fails t if it fails, and returns its combined output.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
