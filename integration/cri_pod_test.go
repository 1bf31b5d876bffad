package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/spec"
)

// CRI namespace modes (runtime.v1.NamespaceMode).
const nsModeNode = 2

// podConfig writes a CRI PodSandboxConfig for a hostNetwork pod named name
// in Kubernetes namespace ns and returns its path.
func (e *criEnv) podConfig(name, ns string, annotations map[string]string) string {
	e.t.Helper()
	logs := filepath.Join(e.logDir, name)
	must(e.t, os.MkdirAll(logs, 0o700))
	cfg := map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": ns, "uid": name + "-uid", "attempt": 0},
		"log_directory": logs,
		"annotations":   annotations,
		"linux": map[string]any{
			"cgroup_parent":    e.cgroupParent,
			"security_context": map[string]any{"namespace_options": map[string]any{"network": nsModeNode}},
		},
	}
	return e.writeJSON("pod-"+name+".json", cfg)
}

// containerConfigWith writes a CRI ContainerConfig with the given linux
// section (nil: the kubelet's defaults) and mounts.
func (e *criEnv) containerConfigWith(name string, args []string, linux map[string]any, mounts []map[string]any) string {
	e.t.Helper()
	p := e.containerConfig(name, args, nil)
	var cfg map[string]any
	b, err := os.ReadFile(p)
	must(e.t, err)
	must(e.t, json.Unmarshal(b, &cfg))
	if linux != nil {
		cfg["linux"] = linux
	}
	if mounts != nil {
		cfg["mounts"] = mounts
	}
	return e.writeJSON("ctr-"+name+"-"+time.Now().Format("150405.000000000")+".json", cfg)
}

// containerConfig writes a CRI ContainerConfig running args in the test
// image and returns its path.
func (e *criEnv) containerConfig(name string, args []string, annotations map[string]string) string {
	e.t.Helper()
	cfg := map[string]any{
		"metadata":    map[string]any{"name": name},
		"image":       map[string]any{"image": e.image},
		"command":     args,
		"log_path":    name + ".log",
		"annotations": annotations,
		// The kubelet always sends its default masked and readonly paths
		// (procMount Default); CRI empties containerd's own otherwise.
		"linux": map[string]any{"security_context": map[string]any{
			"masked_paths":   kubeletMaskedPaths,
			"readonly_paths": kubeletReadonlyPaths,
		}},
	}
	return e.writeJSON("ctr-"+name+"-"+time.Now().Format("150405.000000000")+".json", cfg)
}

// The kubelet's defaults (k8s.io/kubernetes pkg/securitycontext).
var (
	kubeletMaskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"}
	kubeletReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

func (e *criEnv) writeJSON(name string, v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	must(e.t, err)
	p := filepath.Join(e.dir, name)
	must(e.t, os.WriteFile(p, b, 0o600))
	return p
}

// runp starts a pod under the gensee handler and returns its id.
func (e *criEnv) runp(podCfg string) string {
	e.t.Helper()
	return e.crictl("runp", "--runtime", criHandler, podCfg)
}

// createStart creates and starts a container in pod podID; it fails the
// test on any error.
func (e *criEnv) createStart(podID, podCfg, ctrCfg string) string {
	e.t.Helper()
	id := e.crictl("create", podID, ctrCfg, podCfg)
	e.crictl("start", id)
	return id
}

// containerSpec is the OCI spec CRI generated for container id (what the
// shim will find in the bundle's config.json).
func (e *criEnv) containerSpec(id string) *specs.Spec {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, "ctr"), "--address", e.sock, "--namespace", criNS, "containers", "info", "--spec", id)
	out, err := cmd.Output() // stdout only: ctr logs warnings on stderr
	if err != nil {
		e.t.Fatalf("ctr containers info --spec %s: %v", id, err)
	}
	var s specs.Spec
	must(e.t, json.Unmarshal(out, &s))
	return &s
}

// observationOf computes what the runtime derives for spec s, whose
// process.args[0] the test maps to the host file exe it put in the image.
func (e *criEnv) observationOf(s *specs.Spec, exe string) spec.Observation {
	e.t.Helper()
	return e.observationFor(s.Process.Args, s.Process.Env, s.Process.Cwd, s.Process.User.UID, s.Process.User.GID, exe)
}

func (e *criEnv) observationFor(args, env []string, cwd string, uid, gid uint32, exe string) spec.Observation {
	e.t.Helper()
	b, err := os.ReadFile(exe)
	must(e.t, err)
	sum := sha256.Sum256(b)
	cd, err := observe.CommandDigest(args, env, cwd)
	must(e.t, err)
	return spec.Observation{Schema: spec.SchemaObservation, UID: uid, GID: gid,
		ExecutableSHA256: hex.EncodeToString(sum[:]), CommandDigest: cd}
}

// probeObservation learns CRI's spec for a container running args in pod
// podID by creating it once without annotations (CreateContainer runs no
// task, so no admission), then removes it and returns the observation.
// Env (HOSTNAME and the image's) is what CRI sets, not a guess.
func (e *criEnv) probeObservation(podID, podCfg string, args []string) spec.Observation {
	e.t.Helper()
	id := e.crictl("create", podID, e.containerConfig("observe", args, nil), podCfg)
	s := e.containerSpec(id)
	e.crictl("rm", id)
	return e.observationOf(s, filepath.Join(e.dir, "probe"))
}

// waitState waits until container id reaches state (CONTAINER_RUNNING, ...).
func (e *criEnv) waitState(id, state string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := e.crictl("inspect", "-o", "go-template", "--template", "{{.status.state}}", id)
		if strings.TrimSpace(out) == state {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("container %s: state %s, want %s", id, out, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runtimeReady reports whether `crictl info` says the runtime is ready.
func runtimeReady(info string) bool {
	var v struct {
		Status struct {
			Conditions []struct {
				Type   string `json:"type"`
				Status bool   `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if json.Unmarshal([]byte(info), &v) != nil {
		return false
	}
	for _, c := range v.Status.Conditions {
		if c.Type == "RuntimeReady" {
			return c.Status
		}
	}
	return false
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// str walks m by keys and returns the string there ("" if absent).
func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}
