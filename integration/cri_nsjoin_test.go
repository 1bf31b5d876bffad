package integration

import (
	"strings"
)

// CRI namespace modes (runtime.v1.NamespaceMode) of a container's pid.
const (
	nsModePod       = 0
	nsModeContainer = 1
	nsModeTarget    = 3
)

// podNamespaces: a pod's container that shares the pod's pid namespace
// (shareProcessNamespace: CRI names /proc/<sandbox pid>/ns/pid) is
// admitted; one that targets another container's own pid namespace
// (kubectl debug --target) is refused, and crictl shows the rule.
func (e *criEnv) podNamespaces() {
	t := e.t
	podCfg := e.podConfig("nsjoin", k8sCI, nil)
	podID := e.runp(podCfg)
	defer func() {
		e.crictlErr("stopp", podID)
		e.crictlErr("rmp", podID)
	}()
	withPid := func(name string, opts map[string]any, args ...string) string {
		return e.containerConfigWith(name, args, map[string]any{"security_context": map[string]any{
			"namespace_options": opts,
			"masked_paths":      kubeletMaskedPaths,
			"readonly_paths":    kubeletReadonlyPaths}}, nil)
	}
	shared := e.createStart(podID, podCfg, withPid("shared", map[string]any{"pid": nsModePod}, "/bin/probe", "sleep", "3600"))
	e.waitState(shared, "CONTAINER_RUNNING")
	pidns := ""
	for _, n := range e.containerSpec(shared).Linux.Namespaces {
		if n.Type == "pid" {
			pidns = n.Path
		}
	}
	if !strings.HasPrefix(pidns, "/proc/") {
		t.Errorf("the shared container's pid namespace path %q, want the sandbox's /proc/<pid>/ns/pid", pidns)
	}
	own := e.createStart(podID, podCfg, withPid("own", map[string]any{"pid": nsModeContainer}, "/bin/probe", "sleep", "3600"))
	e.waitState(own, "CONTAINER_RUNNING")
	debug := e.crictl("create", podID, withPid("debug", map[string]any{"pid": nsModeTarget, "target_id": own}, "/bin/true"), podCfg)
	out, code := e.crictlCode("start", debug)
	if code == 0 || !strings.Contains(out, "gensee: admission refused: namespace_path:") {
		t.Errorf("a container targeting another container's pid namespace: crictl start exit %d, want refusal namespace_path\n%s", code, out)
	}
	e.crictl("rm", debug)
	for _, id := range []string{shared, own} {
		e.crictl("stop", "-t", "1", id)
		e.crictl("rm", id)
	}
}
