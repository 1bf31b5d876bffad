package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// bkNamespace is the containerd namespace of the kit's containerd worker.
const bkNamespace = "buildkit"

// bkOtelSocket is buildkitd's trace socket (rootful default), bound into
// every RUN step; the kit's operator config allows exactly this file.
const bkOtelSocket = "/run/buildkit/otel-grpc.sock"

// buildkitd is one buildkitd whose containerd worker runs every RUN step
// on the gensee runtime of env e. Its config and the operator config keys
// are contrib/buildkit's, with paths moved under the test's directory, so
// the kit cannot drift from what is tested.
type buildkitd struct {
	e       *env
	dir     string
	sock    string
	cmd     *exec.Cmd
	done    chan struct{}
	runBK   bool // /run/buildkit existed before the test
	runcDir bool // /run/containerd/runc/buildkit existed before the test
	stopped bool
}

func kitFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "contrib", "buildkit", name))
	must(t, err)
	return string(b)
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// startBuildkitd starts buildkitd against e's containerd and appends the
// kit's operator config keys to e's operator config.
func startBuildkitd(e *env) *buildkitd {
	t := e.t
	t.Helper()
	for _, name := range []string{"buildkitd", "buildctl"} {
		if _, err := os.Stat(filepath.Join(e.bin, name)); err != nil {
			t.Fatalf("%s missing in %s: run `make deps` first", name, e.bin)
		}
	}
	if exists(bkOtelSocket) {
		t.Fatalf("%s exists: another buildkitd runs on this host; stop it first", bkOtelSocket)
	}
	b := &buildkitd{e: e, dir: filepath.Join(e.dir, "bk"), done: make(chan struct{}),
		runBK: exists(filepath.Dir(bkOtelSocket)), runcDir: exists("/run/containerd/runc/" + bkNamespace)}
	b.sock = filepath.Join(b.dir, "buildkitd.sock")
	must(t, os.MkdirAll(b.dir, 0o700))
	cfg := kitFile(t, "buildkitd.toml")
	for _, r := range [][2]string{
		{`"/var/lib/buildkit"`, strconv.Quote(filepath.Join(b.dir, "root"))},
		{`"unix:///run/buildkit/buildkitd.sock"`, strconv.Quote("unix://" + b.sock)},
		{`"/run/containerd/containerd.sock"`, strconv.Quote(e.sock)},
		{`"/etc/gensee/config.toml"`, strconv.Quote(e.cfgPath)},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("contrib/buildkit/buildkitd.toml no longer contains %s", r[0])
		}
		cfg = strings.ReplaceAll(cfg, r[0], r[1])
	}
	cfgPath := filepath.Join(b.dir, "buildkitd.toml")
	must(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	op, err := os.ReadFile(e.cfgPath)
	must(t, err)
	must(t, os.WriteFile(e.cfgPath, append(op, "\n"+kitFile(t, "gensee-config.toml")...), 0o600))

	logf, err := os.Create(filepath.Join(b.dir, "buildkitd.log"))
	must(t, err)
	defer logf.Close()
	b.cmd = exec.Command(filepath.Join(e.bin, "buildkitd"), "--config", cfgPath, "--debug")
	b.cmd.Env = append(os.Environ(), "PATH="+e.bin+":/usr/sbin:/usr/bin:/sbin:/bin")
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, b.cmd.Start())
	go func() { b.cmd.Wait(); close(b.done) }()
	t.Cleanup(b.stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := b.buildctl(context.Background(), "debug", "workers")
		if err == nil && strings.Contains(out, "linux/") {
			return b
		}
		select {
		case <-b.done:
			t.Fatalf("buildkitd exited:\n%s", b.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("buildkitd did not come up: %v\n%s\n%s", err, out, b.logTail())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (b *buildkitd) logTail() string {
	log, _ := os.ReadFile(filepath.Join(b.dir, "buildkitd.log"))
	return tail(log, 6000)
}

func (b *buildkitd) buildctl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(b.e.bin, "buildctl"), append([]string{"--addr", "unix://" + b.sock}, args...)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// bkBuild is one finished build.
type bkBuild struct {
	out    string   // buildctl's output (plain progress)
	err    error    // buildctl's exit
	dest   string   // the local export of the image's filesystem
	ops    []string // operations of RUN steps the build ran
	events map[string][]spec.Event
}

// build runs dockerfile over a context that holds a static busybox (and
// the Dockerfile itself), without the cache, and returns the operations of
// the steps it ran.
func (b *buildkitd) build(name, dockerfile string) bkBuild {
	b.e.t.Helper()
	return b.buildWith(name, dockerfile, nil)
}

// buildWith is build with more files in the context.
func (b *buildkitd) buildWith(name, dockerfile string, files map[string]string) bkBuild {
	t := b.e.t
	t.Helper()
	ctxDir := filepath.Join(b.dir, "ctx-"+name)
	must(t, os.MkdirAll(ctxDir, 0o755))
	for f, content := range files {
		must(t, os.WriteFile(filepath.Join(ctxDir, f), []byte(content), 0o644))
	}
	bb, err := os.ReadFile("/bin/busybox")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(ctxDir, "busybox"), bb, 0o755))
	must(t, os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644))
	dest := filepath.Join(b.dir, "out-"+name)
	store := record.Store{Dir: b.e.state}
	before, err := store.Operations()
	must(t, err)
	out, err := b.buildctl(context.Background(), "build", "--frontend", "dockerfile.v0",
		"--local", "context="+ctxDir, "--local", "dockerfile="+ctxDir,
		"--output", "type=local,dest="+dest, "--no-cache", "--progress", "plain")
	after, err2 := store.Operations()
	must(t, err2)
	r := bkBuild{out: out, err: err, dest: dest, events: map[string][]spec.Event{}}
	for _, op := range after {
		if slices.Contains(before, op) {
			continue
		}
		r.ops = append(r.ops, op)
		dir, err := store.OperationDir(op)
		must(t, err)
		if c, err := events.Read(filepath.Join(dir, record.EventsFile)); err == nil {
			r.events[op] = c.Events
		}
	}
	return r
}

// only returns the one operation of a single-RUN build.
func (r bkBuild) only(t *testing.T) string {
	t.Helper()
	if len(r.ops) != 1 {
		t.Fatalf("want one RUN operation, got %d (%v)\nbuild output:\n%s", len(r.ops), r.ops, r.out)
	}
	return r.ops[0]
}

func (b *buildkitd) manifestOf(op string) spec.Manifest {
	b.e.t.Helper()
	var m spec.Manifest
	must(b.e.t, record.Store{Dir: b.e.state}.ReadJSON(op, record.ManifestFile, &m))
	return m
}

// stop stops buildkitd and checks it left nothing: no task or container
// in its namespace, no mount under its root, no process, no cgroup; its
// trace socket (and /run/buildkit, if the test made it) is removed.
func (b *buildkitd) stop() {
	if b.stopped {
		return
	}
	b.stopped = true
	t := b.e.t
	for _, what := range []string{"tasks", "containers"} {
		if out, _ := b.e.ctrErr(bkNamespace, what, "ls", "-q"); len(ids(out)) > 0 {
			t.Errorf("leak: %s left in namespace %s after the builds: %s", what, bkNamespace, out)
		}
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Errorf("buildkitd did not stop on SIGTERM within 30s; killed")
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
	if err := syscall.Kill(-b.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("leak: processes of buildkitd's group %d still running (kill 0: %v)", b.cmd.Process.Pid, err)
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, m := range mountsUnder(b.dir) {
		t.Errorf("leak: mount %s left by the builds", m)
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if t.Failed() {
		t.Logf("buildkitd log (tail):\n%s", b.logTail())
	}
	os.Remove(bkOtelSocket)
	if !b.runBK {
		os.Remove(filepath.Dir(bkOtelSocket))
	}
	if !b.runcDir {
		os.Remove("/run/containerd/runc/" + bkNamespace) // runc's state root of the namespace, empty
	}
	removeCgroupParent(t, "/"+bkNamespace)
}

// ids are the lines of ctr's output that are not its log lines.
func ids(out string) []string {
	var l []string
	for _, f := range strings.Split(out, "\n") {
		if f = strings.TrimSpace(f); f != "" && !strings.HasPrefix(f, "time=") {
			l = append(l, f)
		}
	}
	return l
}

// leftovers lists what the builds left on the host: their gensee tables, cgroups
// below /buildkit, mounts under the test directory, buildkitd.
func (b *buildkitd) leftovers() []string {
	var out []string
	// Only this test's tables: other tests on the host may hold theirs.
	ops, _ := record.Store{Dir: b.e.state}.Operations()
	for _, tb := range hostTables() {
		for _, op := range ops {
			if strings.Contains(tb, "gensee_"+op[:12]) {
				out = append(out, tb)
			}
		}
	}
	for _, mnt := range cgroupMounts() {
		ents, _ := os.ReadDir(filepath.Join(mnt, bkNamespace))
		for _, en := range ents {
			if en.IsDir() {
				out = append(out, fmt.Sprintf("cgroup %s/%s/%s", mnt, bkNamespace, en.Name()))
			}
		}
	}
	for _, m := range mountsUnder(b.e.dir) {
		out = append(out, "mount "+m)
	}
	select {
	case <-b.done:
	default:
		out = append(out, "buildkitd running")
	}
	if exists(bkOtelSocket) {
		out = append(out, bkOtelSocket)
	}
	return out
}
