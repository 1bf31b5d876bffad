package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/integration/testimage"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Kubernetes namespaces of the test pods: one whose selector has a
// safe_default (so pause containers and un-inferred containers get deny_all),
// one whose selector has none.
const (
	k8sCI     = "gensee-ci"
	k8sStrict = "gensee-strict"
	k8sWeb    = "gensee-web"    // pods admitted under a contract that serves a port
	k8sClient = "gensee-client" // pods that may reach that port on loopback
)

// criCatalog routes the two Kubernetes namespaces. Class "fetch" may reach
// the host loopback server on port; everything else is deny_all.
func criCatalog(port, servePort int) spec.Catalog {
	lo := spec.Contract{ID: "lo-server", Version: 1, Network: spec.Network{Mode: spec.NetworkAllowExact,
		Allow: []spec.AllowRule{{IP: "127.0.0.1", Proto: spec.ProtoTCP, Port: port}}}}
	match := func(k8sNS string) spec.SelectorMatch {
		return spec.SelectorMatch{ContainerdNamespace: criNS, Runtime: runtimeName, K8sNamespace: k8sNS}
	}
	web := denyAll("web-serve")
	web.Network.Serve = []spec.ServeRule{{Proto: spec.ProtoTCP, Port: servePort}}
	client := spec.Contract{ID: "web-client", Version: 1, Network: spec.Network{Mode: spec.NetworkAllowExact,
		Allow: []spec.AllowRule{{IP: "127.0.0.1", Proto: spec.ProtoTCP, Port: servePort}}}}
	return catalogOf([]spec.Contract{denyAll("pod-deny"), lo, web, client},
		spec.Selector{ID: "k8s-web", Match: match(k8sWeb), Routes: map[string]string{"build": "web-serve"}, SafeDefault: "web-serve"},
		spec.Selector{ID: "k8s-client", Match: match(k8sClient), Routes: map[string]string{"build": "web-client"}, SafeDefault: "web-client"},
		spec.Selector{ID: "k8s-ci", Match: match(k8sCI), Routes: map[string]string{"build": "pod-deny", "fetch": "lo-server"}, SafeDefault: "pod-deny"},
		spec.Selector{ID: "k8s-strict", Match: match(k8sStrict), Routes: map[string]string{"build": "pod-deny"}})
}

// TestCRI drives the gensee runtime handler through containerd's CRI plugin
// with crictl, as a kubelet would: hostNetwork pods, their pause containers
// admitted like any other, exec and logs, refusals surfacing in crictl's
// errors, two contracts in one pod, and runc options from the runtime
// options. Everything is removed at the end, pass or fail.
func TestCRI(t *testing.T) {
	roottest.Require(t)
	l, addr := hostListener(t)
	port := l.ln.Addr().(*net.TCPAddr).Port
	servePort, closedPort := freePort(t), freePort(t)
	e := startCRI(t, criCatalog(port, servePort))
	probe := []string{"/bin/probe", "connect", "tcp", addr}

	t.Run("HandlerFromContrib", func(t *testing.T) { e.with(t).checkHandler() })
	t.Run("Pod", func(t *testing.T) { e.with(t).podLifecycle(probe, l) })
	t.Run("AdmissionErrors", func(t *testing.T) { e.with(t).admissionErrors(probe, l) })
	t.Run("TwoContractsOnePod", func(t *testing.T) { e.with(t).twoContracts(probe, l) })
	t.Run("HostileSpec", func(t *testing.T) { e.with(t).hostile() })
	t.Run("PodNamespaces", func(t *testing.T) { e.with(t).podNamespaces() })
	t.Run("Serve", func(t *testing.T) { e.with(t).serve(servePort, closedPort, l) })
	t.Run("ManyExecs", func(t *testing.T) { e.with(t).manyExecs() })
}

// with returns e reporting to t (a subtest); the daemon is shared.
func (e *criEnv) with(t *testing.T) *criEnv {
	sub := *e.env
	sub.t = t
	c := *e
	c.env = &sub
	return &c
}

// checkHandler: CRI read the contrib drop-in: runtime type, annotation
// pass-through and the options table as configured.
func (e *criEnv) checkHandler() {
	t := e.t
	var info struct {
		Config struct {
			Containerd struct {
				Runtimes map[string]struct {
					RuntimeType          string         `json:"runtimeType"`
					PodAnnotations       []string       `json:"PodAnnotations"`
					ContainerAnnotations []string       `json:"ContainerAnnotations"`
					Sandboxer            string         `json:"sandboxer"`
					Options              map[string]any `json:"options"`
				} `json:"runtimes"`
			} `json:"containerd"`
			RestrictOOMScoreAdj bool `json:"restrictOOMScoreAdj"`
		} `json:"config"`
	}
	out := e.crictl("info")
	must(t, jsonUnmarshal(out, &info))
	rt, ok := info.Config.Containerd.Runtimes[criHandler]
	if !ok {
		t.Fatalf("crictl info has no runtime handler %q:\n%s", criHandler, tail([]byte(out), 3000))
	}
	want := fmt.Sprint([]string{"io.gensee.boundary.*"})
	if rt.RuntimeType != runtimeName || fmt.Sprint(rt.PodAnnotations) != want || fmt.Sprint(rt.ContainerAnnotations) != want {
		t.Errorf("handler %q: type %q pod_annotations %v container_annotations %v", criHandler, rt.RuntimeType, rt.PodAnnotations, rt.ContainerAnnotations)
	}
	if len(rt.Options) != 0 {
		t.Errorf("handler options %v, want none (the operator config comes from GENSEE_CONFIG)", rt.Options)
	}
	if !info.Config.RestrictOOMScoreAdj {
		t.Errorf("restrict_oom_score_adj not in effect")
	}
}

// podLifecycle: a pod whose pause container and workload both go through
// admission (safe_default deny_all), exec (sync and streaming) and logs
// work, exec'd processes are bound, runc ran with the operator config's
// [runc] options, and stop/rm/rmp remove every table.
func (e *criEnv) podLifecycle(probe []string, l *listener) {
	t := e.t
	podCfg := e.podConfig("web", k8sCI, nil)
	podID := e.runp(podCfg)
	id := e.createStart(podID, podCfg, e.containerConfig("work",
		[]string{"/bin/sh", "-c", "echo hello-from-gensee; exec /bin/probe sleep 3600"}, nil))
	e.waitState(id, "CONTAINER_RUNNING")

	for _, c := range []struct{ what, id, name string }{{"pause container", podID, ""}, {"container", id, "work"}} {
		adm := e.record(c.id, record.AdmissionFile)
		// The pod, for a node daemon's Events; how long admission and the bind took.
		if str(adm, "kubernetes", "namespace") != k8sCI || str(adm, "kubernetes", "pod") != "web" || str(adm, "kubernetes", "pod_uid") != "web-uid" || str(adm, "kubernetes", "container") != c.name {
			t.Errorf("%s: kubernetes %v, want pod %s/web (web-uid) container %q", c.what, adm["kubernetes"], k8sCI, c.name)
		}
		if tm, _ := adm["timing"].(map[string]any); tm == nil || tm["admit_ms"] == nil || tm["bind_ms"] == nil {
			t.Errorf("%s: timing %v, want admit_ms and bind_ms", c.what, adm["timing"])
		}
		if adm["contract_id"] != "pod-deny" || adm["safe_default"] != true || adm["selector"] != "k8s-ci" {
			t.Errorf("%s %s: admitted under %v (safe_default %v, selector %v), want pod-deny by safe_default of k8s-ci",
				c.what, c.id, adm["contract_id"], adm["safe_default"], adm["selector"])
		}
		if str(adm, "facts", "containerd_namespace") != criNS || str(adm, "facts", "k8s_namespace") != k8sCI {
			t.Errorf("%s: facts %v, want containerd namespace %s and k8s namespace %s", c.what, adm["facts"], criNS, k8sCI)
		}
	}

	if out := e.crictl("exec", "-s", id, "/bin/echo", "sync-exec"); !strings.Contains(out, "sync-exec") {
		t.Errorf("crictl exec -s: %q", out)
	}
	if out := e.crictl("exec", id, "/bin/echo", "stream-exec"); !strings.Contains(out, "stream-exec") {
		t.Errorf("crictl exec (streaming): %q", out)
	}
	if out, code := e.crictlCode(append([]string{"exec", "-s", id}, probe...)...); code == 0 || l.accepted.Load() != 0 {
		t.Errorf("an exec'd process reached the host listener under deny_all: exit %d, accepted %d\n%s", code, l.accepted.Load(), out)
	}
	if out := e.crictl("logs", id); !strings.Contains(out, "hello-from-gensee") {
		t.Errorf("crictl logs: %q", out)
	}
	e.runcOptionsHonoured(id)

	e.crictl("stop", "-t", "1", id)
	if m := e.manifestOf(id); m != nil && m.Observation.Counters.DeniedPackets == 0 {
		t.Errorf("deny counter 0 after a denied connect: %+v", m.Observation.Counters)
	}
	e.crictl("rm", id)
	e.crictl("stopp", podID)
	e.crictl("rmp", podID)
	for _, c := range []string{id, podID} {
		e.checkManifest(c, "pod-deny")
	}
	if tables := hostTables(); len(tables) > 0 {
		t.Errorf("gensee tables left after the pod was removed: %v", tables)
	}
}

// runcOptionsHonoured: the operator config's [runc] table (named by the
// ConfigPath CRI sent) reached runc: the BinaryName wrapper ran with the
// configured Root, the container's state is under that Root, and a
// cgroupfs-style cgroups path worked (SystemdCgroup = false).
func (e *criEnv) runcOptionsHonoured(id string) {
	t := e.t
	calls, err := os.ReadFile(e.runcCalls)
	if err != nil || !strings.Contains(string(calls), "--root "+e.runcRoot) {
		t.Errorf("runc wrapper (BinaryName) not called with --root %s: %v\n%s", e.runcRoot, err, tail(calls, 1000))
	}
	if _, err := os.Stat(filepath.Join(e.runcRoot, criNS, id, "state.json")); err != nil {
		t.Errorf("runc state not under the configured Root: %v", err)
	}
	s := e.containerSpec(id)
	if want := e.cgroupParent + "/" + id; s.Linux == nil || s.Linux.CgroupsPath != want {
		t.Errorf("cgroups path %v, want cgroupfs style %s", s.Linux, want)
	}
}

// admissionErrors: refusals reach crictl (what `kubectl describe` shows in
// its events) and nothing of the refused image runs.
func (e *criEnv) admissionErrors(probe []string, l *listener) {
	t := e.t
	before := l.accepted.Load()

	// A pod in a namespace without safe_default and without an inference:
	// its pause container is refused, so RunPodSandbox fails.
	out, code := e.crictlCode("runp", "--runtime", criHandler, e.podConfig("strict-bare", k8sStrict, nil))
	if code == 0 || !strings.Contains(out, "gensee: admission refused") || !strings.Contains(out, "no_inference") {
		t.Errorf("runp in %s without inference: exit %d, want a no_inference refusal\n%s", k8sStrict, code, out)
	}
	t.Logf("crictl runp, refused:\n%s", out)
	if out := e.crictl("pods", "-q", "--name", "strict-bare", "--state", "ready"); out != "" {
		t.Errorf("refused pod is ready: %s", out)
	}

	// The same namespace, the pod carrying an inference for its pause
	// container: pod annotations reach the pause container, which is
	// admitted by that inference (no safe_default to fall back on).
	pauseObs := e.pauseObservation()
	podCfg := e.podConfig("strict", k8sStrict, map[string]string{"io.gensee.boundary.inference": e.inference(pauseObs, nil, nil)})
	podID := e.runp(podCfg)
	if adm := e.record(podID, record.AdmissionFile); adm["contract_id"] != "pod-deny" || adm["safe_default"] != false || str(adm, "inference", "class") != "build" {
		t.Errorf("pause container admission %v, want pod-deny by inference class build", adm)
	}

	// A container that inherits only the pod's inference (made for the
	// pause command): refused at start, with gensee's reason in the error.
	cid := e.crictl("create", podID, e.containerConfig("refused", probe, nil), podCfg)
	out, code = e.crictlCode("start", cid)
	if code == 0 || !strings.Contains(out, "gensee: admission refused") || !strings.Contains(out, "observation_mismatch") {
		t.Errorf("start of a container with another command's inference: exit %d, want an observation_mismatch refusal\n%s", code, out)
	}
	t.Logf("crictl start, refused:\n%s", out)
	// What a kubelet reports for the container (kubectl describe: state
	// and reason, the message in the Failed event).
	st := e.crictl("inspect", "-o", "go-template", "--template", "{{.status.state}} {{.status.reason}}: {{.status.message}}", cid)
	if !strings.HasPrefix(st, "CONTAINER_EXITED StartError:") || !strings.Contains(st, "gensee: admission refused: observation_mismatch") {
		t.Errorf("crictl inspect of the refused container: %s", st)
	}
	if n := l.accepted.Load(); n != before {
		t.Errorf("the refused container reached the listener (%d connections)", n-before)
	}
	e.crictl("rm", cid)

	// A container annotation overrides the pod's: emptied, the container
	// has no inference, and the selector has no safe_default.
	cid = e.crictl("create", podID, e.containerConfig("no-inference", probe, map[string]string{"io.gensee.boundary.inference": ""}), podCfg)
	out, code = e.crictlCode("start", cid)
	if code == 0 || !strings.Contains(out, "gensee: admission refused") || !strings.Contains(out, "no_inference") {
		t.Errorf("start of a container without inference in %s: exit %d, want a no_inference refusal\n%s", k8sStrict, code, out)
	}
	if n := l.accepted.Load(); n != before {
		t.Errorf("the refused container reached the listener (%d connections)", n-before)
	}
	e.crictl("rm", cid)

	// Its own container annotation overrides the pod's and admits it.
	args := []string{"/bin/probe", "sleep", "3600"}
	obs := e.probeObservation(podID, podCfg, args)
	// What a kubelet can send: a pod-level key per container name. It
	// admits the container it names and nobody else.
	perName := e.podConfig("per-name", k8sStrict, map[string]string{
		"io.gensee.boundary.inference":          e.inference(pauseObs, nil, nil),
		"io.gensee.boundary.inference.per-name": e.inference(obs, nil, nil),
	})
	perPod := e.runp(perName)
	cid = e.createStart(perPod, perName, e.containerConfig("per-name", args, nil))
	if adm := e.record(cid, record.AdmissionFile); adm["contract_id"] != "pod-deny" || adm["safe_default"] != false {
		t.Errorf("container admitted by its per-name pod annotation: %v", adm)
	}
	e.crictl("stop", "-t", "1", cid)
	e.crictl("rm", cid)
	e.crictl("stopp", perPod)
	e.crictl("rmp", perPod)

	cid = e.createStart(podID, podCfg, e.containerConfig("own-inference", args,
		map[string]string{"io.gensee.boundary.inference": e.inference(obs, nil, nil)}))
	if adm := e.record(cid, record.AdmissionFile); adm["contract_id"] != "pod-deny" || adm["safe_default"] != false {
		t.Errorf("container with its own inference: %v", adm)
	}
	e.crictl("stop", "-t", "1", cid)
	e.crictl("rm", cid)
	e.crictl("stopp", podID)
	e.crictl("rmp", podID)
}

// pauseObservation is what the runtime derives for the sandbox image's
// command: CRI gives the pause container the image's env and cwd only.
func (e *criEnv) pauseObservation() spec.Observation {
	e.t.Helper()
	// /bin/sleep links to busybox in the image.
	return e.observationFor(pauseCmd, testimage.Env, "/", 0, 0, "/bin/busybox")
}

// twoContracts: two containers of one pod (one network namespace, the
// host's) bound to different contracts by their own inference annotations:
// A (deny_all) cannot reach the loopback server that B (allow_exact to it)
// reaches; the tables are scoped to each container's cgroup.
func (e *criEnv) twoContracts(probe []string, l *listener) {
	t := e.t
	podCfg := e.podConfig("pair", k8sCI, nil)
	podID := e.runp(podCfg)
	args := []string{"/bin/probe", "sleep", "3600"}
	obs := e.probeObservation(podID, podCfg, args)
	infer := func(class string) map[string]string {
		return map[string]string{"io.gensee.boundary.inference": e.inference(obs, func(i *spec.Inference) {
			i.Candidates = []spec.Candidate{{Class: class, ConfidenceBP: 9300}}
		}, nil)}
	}
	a := e.createStart(podID, podCfg, e.containerConfig("a-offline", args, infer("build")))
	b := e.createStart(podID, podCfg, e.containerConfig("b-fetch", args, infer("fetch")))
	e.waitState(a, "CONTAINER_RUNNING")
	e.waitState(b, "CONTAINER_RUNNING")
	for _, c := range []struct{ id, contract string }{{a, "pod-deny"}, {b, "lo-server"}} {
		if adm := e.record(c.id, record.AdmissionFile); adm["contract_id"] != c.contract || adm["safe_default"] != false {
			t.Errorf("container %s: contract %v (safe_default %v), want %s by inference", c.id, adm["contract_id"], adm["safe_default"], c.contract)
		}
	}
	before := l.accepted.Load()
	if out, code := e.crictlCode(append([]string{"exec", "-s", a}, probe...)...); code == 0 {
		t.Errorf("container A (deny_all) connected: exit %d\n%s", code, out)
	}
	if out, code := e.crictlCode(append([]string{"exec", "-s", b}, probe...)...); code != 0 {
		t.Errorf("container B (allow_exact to the server) did not connect: exit %d\n%s", code, out)
	}
	if out, code := e.crictlCode(append([]string{"exec", "-s", a}, probe...)...); code == 0 {
		t.Errorf("container A connected after B did: exit %d\n%s", code, out)
	}
	if n := l.accepted.Load() - before; n != 1 {
		t.Errorf("listener accepted %d connections, want exactly 1 (from B)", n)
	}
	for _, id := range []string{a, b} {
		e.crictl("stop", "-t", "1", id)
		e.crictl("rm", id)
	}
	e.crictl("stopp", podID)
	e.crictl("rmp", podID)
}
