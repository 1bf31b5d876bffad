package runcfront

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestRootStartDeleteUnderRunc runs a real container through the front's
// Start and Delete, with runc (make deps) for everything else: a created
// container starts and runs; a second start, and a delete while it runs,
// are left to runc; once it is killed and gone, Delete removes its state
// and every cgroup path, and runc no longer knows it. A created container
// that never started is left to runc's delete (it kills it).
func TestRootStartDeleteUnderRunc(t *testing.T) {
	if os.Getenv("GENSEE_ROOT_TESTS") != "1" {
		t.Skip("set GENSEE_ROOT_TESTS=1 (as root) to run runc")
	}
	if os.Geteuid() != 0 {
		t.Fatal("GENSEE_ROOT_TESTS=1 but not root: this test runs runc and must be root")
	}
	runc := runcPath(t)
	root := t.TempDir()
	id := "gensee-front-" + strconv.Itoa(os.Getpid())
	bundle := testBundle(t, runc, id, "echo started > /started; exec sleep 30")
	dir := filepath.Join(root, id)
	// Output to a file, not a pipe: the container inherits create's
	// stdio, and a pipe would never reach EOF while it runs.
	out := filepath.Join(t.TempDir(), "out")
	run := func(args ...string) error {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		cmd := exec.Command(runc, append([]string{"--root", root}, args...)...)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Run(); err != nil {
			b, _ := os.ReadFile(out)
			return errors.New(string(b))
		}
		return nil
	}
	t.Cleanup(func() { run("delete", "--force", id) })

	if err := run("create", "--bundle", bundle, id); err != nil {
		t.Fatalf("runc create: %v", err)
	}
	st, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	cgroups, ok := st.cgroupDirs()
	if !ok || len(cgroups) == 0 {
		t.Fatalf("cgroup paths %v", st.CgroupPaths)
	}
	if handled, _ := Delete(dir); handled {
		t.Fatal("Delete of a created container: handled, want runc's")
	}
	handled, err := Start(context.Background(), dir)
	if !handled || err != nil {
		t.Fatalf("Start = %v, %v", handled, err)
	}
	waitFor(t, "the container's process to run", func() bool {
		_, err := os.Stat(filepath.Join(bundle, "rootfs", "started"))
		return err == nil
	})
	if handled, _ := Start(context.Background(), dir); handled {
		t.Error("a second Start: handled, want runc's")
	}
	if handled, _ := Delete(dir); handled {
		t.Fatal("Delete of a running container: handled, want runc's")
	}
	if err := run("kill", id, "KILL"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the init to end", func() bool { return !running(st.init()) })
	handled, err = Delete(dir)
	if !handled || err != nil {
		t.Fatalf("Delete of a stopped container = %v, %v", handled, err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir left: %v", err)
	}
	for _, p := range cgroups {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left: %v", p, err)
		}
	}
	if err := run("state", id); err == nil {
		t.Error("runc still knows the container")
	}
}

// testBundle makes a bundle with a busybox rootfs running sh -c script,
// in its own cgroup /gensee-front-test/<id>.
func testBundle(t *testing.T, runc, id, script string) string {
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "/bin/busybox", filepath.Join(rootfs, "bin", "busybox"))
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v: %s", err, out)
	}
	var spec map[string]any
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	process := spec["process"].(map[string]any)
	process["terminal"] = false
	process["args"] = []string{"/bin/busybox", "sh", "-c", script}
	spec["root"] = map[string]any{"path": "rootfs", "readonly": false}
	spec["linux"].(map[string]any)["cgroupsPath"] = "/gensee-front-test/" + id
	b, _ = json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range []string{"", "blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "pids", "systemd", "unified", "net_cls", "perf_event", "hugetlb", "misc", "rdma"} {
			os.Remove(filepath.Join("/sys/fs/cgroup", m, "gensee-front-test"))
		}
	})
	return bundle
}

func copyFile(t *testing.T, from, to string) {
	src, err := os.Open(from)
	if err != nil {
		t.Fatalf("busybox (apt-get install busybox-static): %v", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func runcPath(t *testing.T) string {
	var cands []string
	if d := os.Getenv("GENSEE_BIN"); d != "" {
		cands = append(cands, filepath.Join(d, "runc"))
	}
	if wd, err := os.Getwd(); err == nil {
		cands = append(cands, filepath.Join(wd, "..", "..", "bin", "runc"))
	}
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	t.Fatalf("no runc binary at %v: run make deps", cands)
	return ""
}
