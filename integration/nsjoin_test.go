package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestJoinOtherContainerNamespaces: a container may not join another
// running container's pid, ipc or uts namespace by path (it would see the
// victim's processes, take their sockets with pidfd_getfd and read its
// rootfs through /proc/<pid>/root), nor its network namespace (one a
// process is already in); the victim keeps running.
func TestJoinOtherContainerNamespaces(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	ns := e.ns("it-hostile")
	e.ctr(ns, "run", "-d", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "victim", "/bin/sleep", "300")
	t.Cleanup(func() {
		e.ctrErr(ns, "tasks", "kill", "-s", "SIGKILL", "victim")
		waitStopped(e, ns, "victim")
		e.ctrErr(ns, "tasks", "delete", "victim")
		e.ctrErr(ns, "containers", "delete", "victim")
	})
	pid := int(e.admissionRecord("it-hostile", "victim")["subject"].(map[string]any)["init_pid"].(float64))
	for _, c := range []struct{ ns, rule string }{
		{"pid", "namespace_path"}, {"ipc", "namespace_path"}, {"uts", "namespace_path"}, {"network", "netns_in_use"},
	} {
		file := map[string]string{"network": "net"}[c.ns]
		if file == "" {
			file = c.ns
		}
		path := fmt.Sprintf("/proc/%d/ns/%s", pid, file)
		out, code := e.run("it-hostile", "thief-"+c.ns, []string{"--with-ns", c.ns + ":" + path}, "/bin/sh", "-c", "ls /proc; cat /proc/"+fmt.Sprint(pid)+"/cmdline")
		if code == 0 || !strings.Contains(out, "admission refused: "+c.rule+":") || !strings.Contains(out, "linux.namespaces[") {
			t.Errorf("--with-ns %s:%s: exit %d, want refusal %s naming the field\n%s", c.ns, path, code, c.rule, out)
		}
	}
	if out := e.ctr(ns, "tasks", "ls"); !strings.Contains(lineOf(out, "victim"), "RUNNING") {
		t.Fatalf("the victim is no longer running:\n%s", out)
	}
}
