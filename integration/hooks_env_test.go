package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/integration/testimage"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/hooks"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// podmanEnv is a private podman (its containers.conf, storage.conf, root,
// runroot, tmp dir, CNI config dir and cgroup parent all in a test dir)
// with the gensee OCI hook in its hooks dir, and the trust material the
// hook reads. Nothing global of podman's changes.
type podmanEnv struct {
	e            *env // the trust material and catalog publishing (no containerd)
	cgroupParent string
	podmanEnv    []string
	// allowSeccomp is the merge of a default-allow base, which leaves
	// clone3 allowed (RuntimeDefault, the default profile, returns
	// ENOSYS for it).
	allowSeccomp string
}

// hookFlags make podman 4.3's default spec one the spec policy admits as
// it is: the hook cannot narrow it (docs/hooks.md, "Podman setup").
var hookFlags = []string{"--cgroupns=private", "--cap-drop=NET_RAW", "--security-opt", "mask=/proc/asound:/sys/devices/virtual/powercap"}

// boundaryAnnotation selects the hook (contrib/hooks/gensee.json's when).
const boundaryAnnotation = "io.gensee.boundary.enabled=true"

func startPodman(t *testing.T, c spec.Contract) *podmanEnv {
	t.Helper()
	roottest.Require(t)
	for _, b := range []string{"podman", "conmon"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("%s missing: run `make deps` (hack/deps.sh installs Debian's podman)", b)
		}
	}
	bin := binDir(t)
	for _, b := range []string{"runc", "gensee-oci-hook"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s missing in %s: run `make deps build` first", b, bin)
		}
	}
	dir, err := os.MkdirTemp("/var/lib", "gensee-hk-")
	must(t, err)
	e := &env{t: t, dir: dir, bin: bin, state: filepath.Join(dir, "gensee-state")}
	p := &podmanEnv{e: e, cgroupParent: "/" + filepath.Base(dir)}
	t.Cleanup(p.stop)
	e.key, e.anKey = newKey(t), newKey(t)
	// podman binds the container's hosts, resolv.conf, hostname,
	// .containerenv and shm from its own storage: writable binds the
	// operator vouches for.
	e.writeOperatorConfig(fmt.Sprintf("writable_bind_roots = [%q, %q]\n",
		filepath.Join(dir, "storage", "overlay-containers"), filepath.Join(dir, "run", "overlay-containers")))
	p.publish(c)

	prof, err := exec.Command(filepath.Join(bin, "gensee-oci-hook"), "seccomp-profile").Output()
	must(t, err)
	seccomp := filepath.Join(dir, "etc", "seccomp.json")
	must(t, os.WriteFile(seccomp, prof, 0o644))
	base := filepath.Join(dir, "etc", "seccomp-allow-base.json")
	must(t, os.WriteFile(base, []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`), 0o644))
	prof, err = exec.Command(filepath.Join(bin, "gensee-oci-hook"), "seccomp-profile", base).Output()
	must(t, err)
	p.allowSeccomp = filepath.Join(dir, "etc", "seccomp-allow.json")
	must(t, os.WriteFile(p.allowSeccomp, prof, 0o644))
	p.writeHook(filepath.Join(dir, "hooks"), hookJSON(t, filepath.Join(bin, "gensee-oci-hook"), e.cfgPath))
	conf := filepath.Join(dir, "containers.conf")
	storage := filepath.Join(dir, "storage.conf")
	registries := filepath.Join(dir, "registries.conf")
	must(t, os.WriteFile(conf, []byte(fmt.Sprintf(`[containers]
# this host lacks CAP_SYS_RESOURCE (hard nofile 20000); podman lowers its own RLIMIT_NPROC to 32768
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
cgroupns = "private"
seccomp_profile = %q
[engine]
# conmon runs the exit command (podman container cleanup, which runs the
# poststop hooks) with this environment only: it must find this config.
conmon_env_vars = [%q, %q, %q, %q]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
hooks_dir = [%q]
tmp_dir = %q
[engine.runtimes]
runc = [%q]
[network]
network_config_dir = %q
`, seccomp, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CONTAINERS_CONF="+conf, "CONTAINERS_STORAGE_CONF="+storage, "CONTAINERS_REGISTRIES_CONF="+registries,
		filepath.Join(dir, "hooks"), filepath.Join(dir, "tmp"), filepath.Join(bin, "runc"), filepath.Join(dir, "cni"))), 0o644))
	must(t, os.WriteFile(storage, []byte(fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n",
		filepath.Join(dir, "storage"), filepath.Join(dir, "run"))), 0o644))
	p.podmanEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "CONTAINERS_CONF=" + conf, "CONTAINERS_STORAGE_CONF=" + storage,
		"CONTAINERS_REGISTRIES_CONF=" + registries}
	must(t, os.WriteFile(registries, nil, 0o644))

	probe := filepath.Join(dir, "probe")
	build := exec.Command("go", "build", "-o", probe, "./probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v\n%s", err, out)
	}
	tarPath := filepath.Join(dir, "image.tar")
	must(t, testimage.Write(tarPath, testimage.Options{Busybox: "/bin/busybox", Probe: probe}))
	e.image = testimage.Name
	p.podman("load", "-i", tarPath)
	return p
}

// hookJSON is contrib/hooks/gensee.json pointed at the built binary and
// the test's operator config, with a short grace.
func hookJSON(t *testing.T, bin, cfg string) []byte {
	b, err := os.ReadFile("../contrib/hooks/gensee.json")
	must(t, err)
	var h map[string]any
	must(t, json.Unmarshal(b, &h))
	hk := h["hook"].(map[string]any)
	hk["path"] = bin
	hk["args"] = []string{"gensee-oci-hook", "--config", cfg, "--grace", "3s"}
	out, err := json.Marshal(h)
	must(t, err)
	return out
}

func (p *podmanEnv) writeHook(dir string, b []byte) {
	must(p.e.t, os.MkdirAll(dir, 0o755))
	must(p.e.t, os.WriteFile(filepath.Join(dir, "gensee.json"), b, 0o644))
}

// publish signs a catalog whose one selector (runtime oci-hooks) routes
// everything to c by its safe default.
func (p *podmanEnv) publish(c spec.Contract) {
	if c.ID == "" {
		c.ID = "hooked"
	}
	if c.Version == 0 {
		c.Version = 1
	}
	p.e.publish(catalogOf([]spec.Contract{c}, spec.Selector{ID: "sel-hooks",
		Match: spec.SelectorMatch{Runtime: hooks.Runtime}, SafeDefault: c.ID}))
}

// podman runs podman against the private storage and fails on error.
func (p *podmanEnv) podman(args ...string) string {
	p.e.t.Helper()
	out, code := p.podmanCode(args...)
	if code != 0 {
		p.e.t.Fatalf("podman %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func (p *podmanEnv) podmanCode(args ...string) (string, int) {
	out, _, code := p.podmanSplit(args...)
	return out, code
}

// podmanSplit runs podman and returns its output (both streams), its
// stdout alone and its exit code.
func (p *podmanEnv) podmanSplit(args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append([]string{"--log-level=info"}, args...)...)
	cmd.Env = p.podmanEnv
	var out, stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, &stdout), &out
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		p.e.t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), stdout.String(), cmd.ProcessState.ExitCode()
}

// run is `podman run --rm` of the test image with the boundary annotation,
// host network unless flags say otherwise, in the test's cgroup parent.
func (p *podmanEnv) run(name string, flags []string, args ...string) (string, int) {
	return p.runBase(name, hookFlags, flags, args...)
}

// runBase is run with base in place of hookFlags.
func (p *podmanEnv) runBase(name string, base, flags []string, args ...string) (string, int) {
	all := []string{"run", "--rm", "--name", name, "--cgroup-parent", p.cgroupParent, "--annotation", boundaryAnnotation}
	all = append(all, base...)
	all = append(all, flags...)
	all = append(all, p.e.image)
	return p.podmanCode(append(all, args...)...)
}

// manifestOf reads the manifest of container id's newest operation.
func (p *podmanEnv) manifestOf(id string) *spec.Manifest {
	p.e.t.Helper()
	st := record.Store{Dir: p.e.state}
	op, err := st.Lookup(hooks.Namespace, id)
	must(p.e.t, err)
	var m spec.Manifest
	if err := st.ReadJSON(op, record.ManifestFile, &m); err != nil {
		dir, _ := st.OperationDir(op)
		log, _ := os.ReadFile(filepath.Join(dir, hooks.MonitorLog))
		p.e.t.Fatalf("manifest of %s: %v\nmonitor log:\n%s", id, err, log)
	}
	return &m
}

// lastOperation is the container whose index entry was written last, and
// its manifest.
func (p *podmanEnv) lastOperation(t *testing.T) (string, *spec.Manifest) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(p.e.state, "index", hooks.Namespace))
	must(t, err)
	var newest os.DirEntry
	var when time.Time
	for _, en := range ents {
		fi, err := en.Info()
		if err == nil && fi.ModTime().After(when) {
			newest, when = en, fi.ModTime()
		}
	}
	if newest == nil {
		t.Fatal("no operation recorded")
	}
	return newest.Name(), p.manifestOf(newest.Name())
}
