package integration

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/integration/testimage"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/spec"
)

// env is one private containerd and the gensee trust material it uses.
type env struct {
	t       *testing.T
	dir     string // root-owned 0700 under /var/lib (never /tmp: the anchor check rejects it)
	bin     string
	sock    string
	daemon  *exec.Cmd
	cfgPath string // gensee operator config
	state   string // gensee state dir
	key     ed25519.PrivateKey
	anKey   ed25519.PrivateKey // the reference analyzer's key
	version uint64
	image   string

	imageTar string
	imported map[string]bool // namespaces the image is imported into
}

func binDir(t *testing.T) string {
	if b := os.Getenv("GENSEE_BIN"); b != "" {
		return b
	}
	b, err := filepath.Abs("../bin")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startEnv starts a private containerd with the gensee runtime and a signed
// catalog from cat (version and times are set here).
func startEnv(t *testing.T, cat spec.Catalog) *env {
	t.Helper()
	roottest.Require(t)
	bin := binDir(t)
	for _, b := range []string{"containerd", "ctr", "runc", "containerd-shim-gensee-v2", "gensee-shim", "containerd-shim-runc-v2"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s missing in %s: run `make deps build` first", b, bin)
		}
	}
	dir, err := os.MkdirTemp("/var/lib", "gensee-it-")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, bin: bin, sock: filepath.Join(dir, "c.sock"), state: filepath.Join(dir, "gensee-state")}
	t.Cleanup(e.stop)
	e.key = newKey(t)
	e.anKey = newKey(t)
	e.writeOperatorConfig("")
	e.publish(cat)
	e.startDaemon()
	e.importImage()
	return e
}

// writeOperatorConfig writes the trust anchor (e.key's public half) in
// <dir>/etc and the operator config e.cfgPath naming it, the catalog
// publish signs, e.state and containerd_root (the test daemon's root,
// where its snapshots lie); extra (more keys, then tables) is appended to
// the config.
func (e *env) writeOperatorConfig(extra string) {
	etc := filepath.Join(e.dir, "etc")
	must(e.t, os.MkdirAll(etc, 0o700))
	anchor := filepath.Join(etc, "catalog-root-public-key.hex")
	must(e.t, os.WriteFile(anchor, []byte(spec.FormatPublicKeyHex(e.key.Public().(ed25519.PublicKey))), 0o400))
	e.cfgPath = filepath.Join(etc, "config.toml")
	must(e.t, os.WriteFile(e.cfgPath, []byte(fmt.Sprintf("catalog = %q\ntrust_anchor = %q\nstate_dir = %q\ncontainerd_root = %q\n",
		filepath.Join(etc, "catalog.signed.json"), anchor, e.state, filepath.Join(e.dir, "root"))+extra), 0o600))
}

func newKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// publish signs cat as the next catalog version and installs it.
func (e *env) publish(cat spec.Catalog) {
	e.t.Helper()
	e.version++
	cat.Schema = spec.SchemaCatalog
	cat.Version = e.version
	cat.IssuedAt = time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	if cat.ExpiresAt.IsZero() {
		cat.ExpiresAt = cat.IssuedAt.Add(24 * time.Hour)
	}
	for i := range cat.Analyzers {
		if cat.Analyzers[i].PublicKey == "" {
			cat.Analyzers[i].PublicKey = strings.TrimSpace(spec.FormatPublicKeyHex(e.anKey.Public().(ed25519.PublicKey)))
		}
	}
	payload, err := json.Marshal(cat)
	must(e.t, err)
	env, err := spec.SignEnvelope(spec.PayloadTypeCatalog, payload, e.key)
	must(e.t, err)
	b, err := json.Marshal(env)
	must(e.t, err)
	must(e.t, os.WriteFile(filepath.Join(e.dir, "etc", "catalog.signed.json"), b, 0o600))
}

func (e *env) startDaemon() { e.startDaemonPath(e.bin + ":/usr/sbin:/usr/bin:/sbin:/bin") }

// startDaemonPath is startDaemon with the daemon's (and so every shim's)
// PATH given.
func (e *env) startDaemonPath(path string) {
	e.t.Helper()
	cfg := fmt.Sprintf(`version = 3
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "io.containerd.podsandbox.controller.v1", "io.containerd.sandbox.controller.v1.shim"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(e.dir, "root"), filepath.Join(e.dir, "state"), e.sock, e.sock+".ttrpc")
	cfgPath := filepath.Join(e.dir, "containerd.toml")
	must(e.t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	e.launchDaemon(cfgPath, path)
}

// launchDaemon starts containerd with config cfgPath and PATH path, its
// log in containerd.log, and waits (30 s at most) until it answers. The
// shims inherit the daemon's environment: the test's operator config
// directory is one a task may name.
func (e *env) launchDaemon(cfgPath, path string) {
	e.t.Helper()
	logf, err := os.Create(filepath.Join(e.dir, "containerd.log"))
	must(e.t, err)
	cmd := exec.Command(filepath.Join(e.bin, "containerd"), "--config", cfgPath)
	cmd.Env = append(os.Environ(), "PATH="+path, config.EnvConfigDirs+"="+filepath.Dir(e.cfgPath), config.EnvConfig+"="+e.cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(e.t, cmd.Start())
	e.daemon = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := e.ctrErr("default", "version"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(e.dir, "containerd.log"))
			e.t.Fatalf("containerd did not come up:\n%s", tail(log, 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (e *env) importImage() {
	e.t.Helper()
	probe := filepath.Join(e.dir, "probe")
	build := exec.Command("go", "build", "-o", probe, "./probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		e.t.Fatalf("build probe: %v\n%s", err, out)
	}
	tarPath := filepath.Join(e.dir, "image.tar")
	must(e.t, testimage.Write(tarPath, testimage.Options{Busybox: "/bin/busybox", Probe: probe}))
	e.image = testimage.Name
	e.imageTar = tarPath
	e.imported = map[string]bool{}
}

// ns makes sure the test image is in namespace name and returns name.
func (e *env) ns(name string) string {
	e.t.Helper()
	if !e.imported[name] {
		e.ctr(name, "images", "import", e.imageTar)
		e.imported[name] = true
	}
	return name
}

// ctr runs the ctr binary against the private daemon and fails on error.
func (e *env) ctr(ns string, args ...string) string {
	e.t.Helper()
	out, err := e.ctrErr(ns, args...)
	if err != nil {
		e.t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (e *env) ctrErr(ns string, args ...string) (string, error) {
	return e.ctrCtx(context.Background(), ns, args...)
}

func (e *env) ctrCtx(ctx context.Context, ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "ctr"), append([]string{"--address", e.sock, "--namespace", ns}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+e.bin+":/usr/sbin:/usr/bin:/sbin:/bin")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}
