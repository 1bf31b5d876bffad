package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/integration/testimage"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// The CRI side of the tests: CRI's own containerd namespace, the runtime
// handler name a RuntimeClass would carry, and the sandbox (pause) image the
// test builds, since no registry is reachable.
const (
	criNS      = "k8s.io"
	criHandler = "gensee"
	pauseImage = "docker.io/gensee/pause:test"
)

// criEnv is a private containerd with its CRI plugin enabled and the gensee
// runtime handler configured from contrib/containerd/gensee-runtime.toml,
// driven with crictl the way a kubelet would drive it.
type criEnv struct {
	*env
	crictlConfig string
	// cgroupParent is the pods' cgroup parent (cgroupfs style: the test's
	// runc options say SystemdCgroup = false).
	cgroupParent string
	runcRoot     string // runc's Root from the operator config's [runc] table
	runcCalls    string // the runc wrapper (BinaryName) logs each call here
	logDir       string
}

// startCRI starts the daemon with CRI and a signed catalog from cat.
func startCRI(t *testing.T, cat spec.Catalog) *criEnv {
	t.Helper()
	roottest.Require(t)
	bin := binDir(t)
	for _, b := range []string{"containerd", "ctr", "runc", "crictl", "containerd-shim-gensee-v2", "gensee-shim", "containerd-shim-runc-v2"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s missing in %s: run `make deps build` first", b, bin)
		}
	}
	dir, err := os.MkdirTemp("/var/lib", "gensee-cri-")
	if err != nil {
		t.Fatal(err)
	}
	e := &criEnv{env: &env{t: t, dir: dir, bin: bin, sock: filepath.Join(dir, "c.sock"), state: filepath.Join(dir, "gensee-state")}}
	// Cleanups run last-in first-out: pods go through CRI before env.stop
	// stops the daemon and checks for leaks.
	t.Cleanup(e.stop)
	e.cgroupParent = "/" + filepath.Base(dir)
	t.Cleanup(e.removeCgroupParent)
	e.key = newKey(t)
	e.anKey = newKey(t)

	e.runcRoot = filepath.Join(dir, "runc")
	e.runcCalls = filepath.Join(dir, "runc-calls.log")
	wrapper := filepath.Join(dir, "runc-wrapper")
	must(t, os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\necho \"$*\" >>%s\nexec %s \"$@\"\n",
		e.runcCalls, filepath.Join(bin, "runc"))), 0o700))
	// CRI binds each pod's hosts, hostname and resolv.conf from its own
	// root (containerd_root, which writeOperatorConfig sets to the test
	// daemon's; the state is read from the bundle path), none of it the
	// default.
	e.writeOperatorConfig(fmt.Sprintf(`[runc]
  SystemdCgroup = false
  BinaryName = %q
  Root = %q
`, wrapper, e.runcRoot))
	e.publish(cat)

	e.logDir = filepath.Join(dir, "pod-logs")
	must(t, os.MkdirAll(e.logDir, 0o700))
	e.startCRIDaemon()
	e.importImage()
	e.ns(criNS)
	pauseTar := filepath.Join(dir, "pause.tar")
	must(t, testimage.Write(pauseTar, testimage.Options{Busybox: "/bin/busybox", Probe: filepath.Join(dir, "probe"),
		Name: pauseImage, Cmd: pauseCmd}))
	e.ctr(criNS, "images", "import", pauseTar)
	t.Cleanup(e.removePods)
	e.waitCRIReady()
	return e
}

// pauseCmd is the sandbox image's command: sleep until killed.
var pauseCmd = []string{"/bin/sleep", "inf"}

// startCRIDaemon writes the daemon config and starts containerd. The gensee
// handler is the contrib drop-in itself, imported as an operator would
// import it; the shims find the test's operator config through GENSEE_CONFIG
// in the daemon's environment, as a node's systemd drop-in would set it.
func (e *criEnv) startCRIDaemon() {
	t := e.t
	snippet, err := os.ReadFile("../contrib/containerd/gensee-runtime.toml")
	must(t, err)
	confd := filepath.Join(e.dir, "conf.d")
	must(t, os.MkdirAll(confd, 0o700))
	dropIn := filepath.Join(confd, "gensee.toml")
	must(t, os.WriteFile(dropIn, snippet, 0o600)) // verbatim: the operator config comes from GENSEE_CONFIG
	cni := filepath.Join(e.dir, "cni")
	for _, d := range []string{"net.d", "bin"} {
		must(t, os.MkdirAll(filepath.Join(cni, d), 0o700))
	}
	// NRI is off: its socket is host-wide and other daemons may hold it.
	// CNI points at empty directories: hostNetwork pods need no CNI, and
	// nothing of the test may route off the machine.
	cfg := fmt.Sprintf(`version = 3
root = %q
state = %q
imports = [%q]
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = %q
[ttrpc]
  address = %q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    conf_dir = %q
    bin_dirs = [%q]

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = %q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(e.dir, "root"), filepath.Join(e.dir, "state"), dropIn, e.sock, e.sock+".ttrpc",
		filepath.Join(cni, "net.d"), filepath.Join(cni, "bin"), pauseImage)
	cfgPath := filepath.Join(e.dir, "containerd.toml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	e.crictlConfig = filepath.Join(e.dir, "crictl.yaml")
	must(t, os.WriteFile(e.crictlConfig, []byte(fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n", e.sock, e.sock)), 0o600))

	e.launchDaemon(cfgPath, e.bin+":/usr/sbin:/usr/bin:/sbin:/bin")
}

// waitCRIReady waits until CRI reports its runtime ready and sees the
// sandbox image.
func (e *criEnv) waitCRIReady() {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := e.crictlErr("info")
		img, ierr := e.crictlErr("inspecti", pauseImage)
		if err == nil && ierr == nil && strings.Contains(out, `"RuntimeReady"`) && runtimeReady(out) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("CRI not ready: %v %v\n%s\n%s", err, ierr, tail([]byte(out), 2000), img)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// crictl runs crictl against the private daemon and fails on error.
func (e *criEnv) crictl(args ...string) string {
	e.t.Helper()
	out, err := e.crictlErr(args...)
	if err != nil {
		e.t.Fatalf("crictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func (e *criEnv) crictlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "crictl"), append([]string{"--config", e.crictlConfig}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+e.bin+":/usr/sbin:/usr/bin:/sbin:/bin")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// crictlCode runs crictl and returns its output and exit code.
func (e *criEnv) crictlCode(args ...string) (string, int) {
	e.t.Helper()
	out, err := e.crictlErr(args...)
	if err == nil {
		return out, 0
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		e.t.Fatalf("crictl %s: %v", strings.Join(args, " "), err)
	}
	return out, ee.ExitCode()
}

// removePods stops and removes every pod through CRI, pass or fail.
func (e *criEnv) removePods() {
	if e.daemon == nil {
		return
	}
	out, _ := e.crictlErr("pods", "-q")
	for _, id := range strings.Fields(out) {
		if o, err := e.crictlErr("stopp", id); err != nil {
			e.t.Errorf("cleanup: crictl stopp %s: %v\n%s", id, err, o)
		}
		if o, err := e.crictlErr("rmp", "-f", id); err != nil {
			e.t.Errorf("cleanup: crictl rmp %s: %v\n%s", id, err, o)
		}
	}
	if out, _ := e.crictlErr("ps", "-a", "-q"); strings.TrimSpace(out) != "" {
		e.t.Errorf("leak: containers left after every pod was removed: %s", out)
	}
}

// removeCgroupParent removes the pods' cgroup parent from every hierarchy
// (runc makes it as an intermediate directory); a child left is a leak.
func (e *criEnv) removeCgroupParent() { removeCgroupParent(e.t, e.cgroupParent) }
