package integration

import (
	"encoding/json"
	"os"
	"strings"
	"sync"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/spec"
)

// hostile: what a pod author can write is admitted against the same
// allowlist, and the refusal is what kubectl describe shows (crictl
// inspect: state, reason, message); kubectl exec gets the init's
// capability policy.
func (e *criEnv) hostile() {
	t := e.t
	podCfg := e.podConfig("hostile", k8sCI, nil)
	podID := e.runp(podCfg)
	defer func() {
		e.crictlErr("stopp", podID)
		e.crictlErr("rmp", podID)
	}()

	id := e.createStart(podID, podCfg, e.containerConfig("execd", []string{"/bin/probe", "sleep", "3600"}, nil))
	e.waitState(id, "CONTAINER_RUNNING")
	for _, kind := range []string{"packet", "raw4", "vsock"} {
		out, code := e.crictlCode("exec", "-s", id, "/bin/probe", "socket", kind)
		if code == 0 || !strings.Contains(out, "operation not permitted") {
			t.Errorf("kubectl exec-like probe socket %s: exit %d, want EPERM\n%s", kind, code, out)
		}
	}
	// UpdateContainerResources passes through the shim's own admission.
	if out, code := e.crictlCode("update", "--memory", "268435456", id); code != 0 {
		t.Errorf("crictl update --memory: exit %d\n%s", code, out)
	}
	e.crictl("stop", "-t", "1", id)
	e.crictl("rm", id)

	h, err := cgroup.Find()
	must(t, err)
	for _, c := range []struct {
		name, rule string
		linux      map[string]any
		mounts     []map[string]any
	}{
		{"ptrace", "refused_capability", map[string]any{"security_context": map[string]any{
			"capabilities":   map[string]any{"add_capabilities": []string{"SYS_PTRACE"}},
			"masked_paths":   kubeletMaskedPaths,
			"readonly_paths": kubeletReadonlyPaths}}, nil},
		{"unmasked", "unmasked_proc", map[string]any{"security_context": map[string]any{"masked_paths": []string{}, "readonly_paths": []string{}}}, nil},
		{"hostcg", "writable_kernel_mount", nil, []map[string]any{{"container_path": "/hostcg", "host_path": h.Mountpoint}}},
	} {
		cfg := e.containerConfigWith(c.name, []string{"/bin/true"}, c.linux, c.mounts)
		cid := e.crictl("create", podID, cfg, podCfg)
		out, code := e.crictlCode("start", cid)
		if code == 0 || !strings.Contains(out, "gensee: admission refused: "+c.rule+":") {
			t.Errorf("%s: crictl start exit %d, want refusal %s\n%s", c.name, code, c.rule, out)
		}
		st := e.crictl("inspect", "-o", "go-template", "--template", "{{.status.state}} {{.status.reason}}: {{.status.message}}", cid)
		if !strings.HasPrefix(st, "CONTAINER_EXITED StartError:") || !strings.Contains(st, "admission refused: "+c.rule) {
			t.Errorf("%s: crictl inspect %s", c.name, st)
		}
		e.crictl("rm", cid)
	}

	// Sysctls are the pod's (its sandbox's spec): a non-network one
	// refuses the pause container, so the pod does not start.
	sysctlPod := e.podConfig("sysctl", k8sCI, nil)
	var pc map[string]any
	b, err := os.ReadFile(sysctlPod)
	must(t, err)
	must(t, json.Unmarshal(b, &pc))
	pc["linux"].(map[string]any)["sysctls"] = map[string]string{"kernel.msgmax": "65536"}
	out, code := e.crictlCode("runp", "--runtime", criHandler, e.writeJSON("pod-sysctl.json", pc))
	if code == 0 || !strings.Contains(out, "gensee: admission refused: sysctl:") {
		t.Errorf("pod with sysctl kernel.msgmax: exit %d, want refusal sysctl\n%s", code, out)
	}
}

// manyExecs: a hostNetwork pod's container (the cgroup scope, where an
// escape downgrades the status) receives 80 execs, four at a time, as
// kubectl exec and exec probes make them: runc's exec init in transit is
// no escape; the manifest says enforced and the log holds no event.
func (e *criEnv) manyExecs() {
	t := e.t
	podCfg := e.podConfig("execs", k8sCI, nil)
	podID := e.runp(podCfg)
	defer func() {
		e.crictlErr("stopp", podID)
		e.crictlErr("rmp", podID)
	}()
	id := e.createStart(podID, podCfg, e.containerConfig("busy", []string{"/bin/probe", "sleep", "3600"}, nil))
	e.waitState(id, "CONTAINER_RUNNING")
	const execs, parallel = 80, 4
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		wg.Go(func() {
			for i := w; i < execs; i += parallel {
				if out, code := e.crictlCode("exec", "-s", id, "/bin/true"); code != 0 {
					t.Errorf("exec %d: exit %d\n%s", i, code, out)
				}
			}
		})
	}
	wg.Wait()
	e.crictl("stop", "-t", "1", id)
	m := e.manifestOf(id)
	if m == nil {
		return
	}
	if m.Enforcement.Network.Status != spec.NetworkEnforced || len(m.Observation.Escapes) != 0 || len(m.Findings) != 0 {
		t.Errorf("after %d execs: status %s, escapes %+v, findings %+v; want enforced, none", execs, m.Enforcement.Network.Status, m.Observation.Escapes, m.Findings)
	}
	if m.Enforcement.CapabilitiesRemovedExecs != execs {
		t.Errorf("capabilities_removed_execs %d, want %d", m.Enforcement.CapabilitiesRemovedExecs, execs)
	}
	e.crictl("rm", id)
}
