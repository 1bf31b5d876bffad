package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestCallerNoProfileRuntimeDefault: a container whose spec has no seccomp
// profile (ctr run without --seccomp) runs under containerd's default
// profile with the family rules merged: unshare -U -r, which under a
// default-allow profile gives every capability over new namespaces, is
// refused (issue 25, item 7).
func TestCallerNoProfileRuntimeDefault(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	out, code := e.run("it-hostile", "nosec", nil, "/bin/sh", "-c",
		"/bin/busybox unshare -U -r -n -m /bin/true; echo rc=$?; grep Seccomp: /proc/self/status")
	if code != 0 || strings.Contains(out, "rc=0") || !strings.Contains(strings.ToLower(out), "operation not permitted") || !strings.Contains(out, "Seccomp:\t2") {
		t.Fatalf("unshare without a profile: exit %d, want EPERM under a filter\n%s", code, out)
	}
	rec := e.admissionRecord("it-hostile", "nosec")
	if sc, _ := rec["seccomp"].(map[string]any); sc["profile_created"] != true {
		t.Fatalf("admission record seccomp: %v", fmt.Sprint(rec["seccomp"]))
	}
}
