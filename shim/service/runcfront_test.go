package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	runc "github.com/containerd/go-runc"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/runcfront"
)

// TestHandRunc: with a front, the inner task service gets the bundle's
// link as its runc, to the admitted runc for the create and to the front
// after it (toFront), and the bundle names the admitted runc for the
// front; in a bundle whose directories others may write, or without a
// front, the real runc itself, which toFront leaves alone.
func TestHandRunc(t *testing.T) {
	s := &service{}
	s.front.once.Do(func() { s.front.path = "/opt/gensee/bin/gensee-runc" })
	admitted := &runcoptions.Options{BinaryName: "/bin/true", Root: "/run/gensee-runc"}

	bundle := t.TempDir()
	h, err := s.handRunc(bundle, admitted, "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(bundle, runcLink)
	if h.BinaryName != link || h.Root != admitted.Root || admitted.BinaryName != "/bin/true" {
		t.Errorf("handed %+v (admitted %+v)", h, admitted)
	}
	if to, err := os.Readlink(link); err != nil || to != "/bin/true" {
		t.Errorf("the create's runc is %q, %v", to, err)
	}
	if err := s.toFront(bundle, h); err != nil {
		t.Fatal(err)
	}
	if to, err := os.Readlink(link); err != nil || to != "/opt/gensee/bin/gensee-runc" {
		t.Errorf("after the create, the runc is %q, %v", to, err)
	}
	b, err := os.ReadFile(filepath.Join(bundle, runcfront.RuncFile))
	if err != nil || string(b) != "/bin/true\n" {
		t.Errorf("bundle names %q, %v", b, err)
	}

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if h, err := s.handRunc(open, admitted, "/bin/true"); err != nil || h.BinaryName != "/bin/true" {
		t.Errorf("untrusted bundle: handed %+v, %v", h, err)
	}
	if _, err := os.Stat(filepath.Join(open, runcfront.RuncFile)); err == nil {
		t.Error("untrusted bundle: the runc file was written")
	}
	// A link planted there is left alone: only the one handRunc made is
	// re-pointed.
	planted := filepath.Join(open, runcLink)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(planted); err == nil {
		t.Error("untrusted bundle: a runc link was made")
	}
	must(os.Symlink("/planted", planted))
	must(s.toFront(open, admitted))
	if to, _ := os.Readlink(planted); to != "/planted" {
		t.Errorf("untrusted bundle: a planted link was re-pointed to %q", to)
	}

	none := &service{}
	none.front.once.Do(func() {})
	if h, err := none.handRunc(t.TempDir(), admitted, "/bin/true"); err != nil || h != admitted {
		t.Errorf("no front: handed %+v, %v", h, err)
	}
}

// recordingMonitor is a go-runc monitor that only records what it was
// asked to run.
type recordingMonitor struct{ started []string }

func (m *recordingMonitor) Start(c *exec.Cmd) (chan runc.Exit, error) {
	m.started = append(m.started, strings.Join(c.Args[1:], " "))
	ec := make(chan runc.Exit, 1)
	ec <- runc.Exit{Status: 7}
	return ec, nil
}

func (m *recordingMonitor) StartLocked(c *exec.Cmd) (chan runc.Exit, error) { return m.Start(c) }

func (m *recordingMonitor) Wait(_ *exec.Cmd, ec chan runc.Exit) (int, error) {
	return (<-ec).Status, nil
}

// TestFrontMonitor: a call to a bundle's runc link that points to the
// front, which the front answers itself (the delete of a stopped
// container), is answered in the shim, by go-runc's own calling code,
// with nothing run; a call the front leaves to runc, and any call while
// the link still points to the real runc, run the link as before.
func TestFrontMonitor(t *testing.T) {
	const front = "/opt/gensee/bin/gensee-runc"
	bundle, root := t.TempDir(), t.TempDir()
	link := filepath.Join(bundle, runcLink)
	if err := os.Symlink(front, link); err != nil {
		t.Fatal(err)
	}
	// A stopped container's runc state: its init long gone, its cgroup
	// paths already removed.
	state := filepath.Join(root, "t1")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	st := `{"init_process_pid":4194000,"init_process_start":17,"cgroup_paths":{"":"/sys/fs/cgroup/gensee-no-such-test/t1"},
 "config":{"namespaces":[{"type":"NEWPID"},{"type":"NEWNS"}],"cgroups":{"path":"/t1"}}}`
	if err := os.WriteFile(filepath.Join(state, "state.json"), []byte(st), 0o600); err != nil {
		t.Fatal(err)
	}
	next := &recordingMonitor{}
	m := &frontMonitor{next: next, front: func() string { return front }}
	r := &runc.Runc{Command: link, Root: root, Log: filepath.Join(bundle, "log.json"), LogFormat: runc.JSON}
	prev := runc.Monitor
	runc.Monitor = m
	t.Cleanup(func() { runc.Monitor = prev })

	if err := r.Delete(context.Background(), "t1", nil); err != nil {
		t.Fatalf("delete of a stopped container: %v", err)
	}
	if _, err := os.Lstat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state dir is left: %v", err)
	}
	if len(next.started) != 0 {
		t.Errorf("ran %q, want the delete answered in the shim", next.started)
	}
	// runc state: the front's to hand on, so the link runs.
	if _, err := r.State(context.Background(), "t1"); err == nil {
		t.Error("state: no error from a run that exited 7")
	}
	if len(next.started) != 1 || !strings.HasSuffix(next.started[0], "state t1") {
		t.Errorf("ran %q, want the link run for state", next.started)
	}
	// A created container: its exec fifo, and an init (a shell here)
	// that writes the fifo's byte once it has a reader.
	state3 := filepath.Join(root, "t3")
	if err := os.Mkdir(state3, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(state3, "exec.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	init := exec.Command("sh", "-c", `exec 3>"$1"; printf 0 >&3; exec 3>&-; exec sleep 30`, "sh", fifo)
	if err := init.Start(); err != nil {
		t.Fatal(err)
	}
	go init.Wait()
	t.Cleanup(func() { init.Process.Kill() })
	stat, err := cgroup.ReadStat(init.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	st3 := fmt.Sprintf(`{"init_process_pid":%d,"init_process_start":%d,"config":{"namespaces":[{"type":"NEWPID"}],"cgroups":{"path":"/t3"}}}`, init.Process.Pid, stat.Start)
	if err := os.WriteFile(filepath.Join(state3, "state.json"), []byte(st3), 0o600); err != nil {
		t.Fatal(err)
	}
	// A start outside the shim's Start (no context named for it), and one
	// whose context has ended, run the link: only a start bounded by its
	// caller's context is answered here.
	if err := r.Start(context.Background(), "t3"); err == nil {
		t.Error("start: no error from a run that exited 7")
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	done := m.starting("t3", ended)
	if err := r.Start(context.Background(), "t3"); err == nil {
		t.Error("start with its context ended: no error from a run that exited 7")
	}
	done()
	if len(next.started) != 3 || !strings.HasSuffix(next.started[1], "start t3") || !strings.HasSuffix(next.started[2], "start t3") {
		t.Errorf("ran %q, want the link run for both starts", next.started)
	}
	if _, err := os.Lstat(fifo); err != nil {
		t.Fatalf("the fifo was read by a start that was not answered here: %v", err)
	}
	// Inside the shim's Start: answered here, the fifo read and removed.
	done = m.starting("t3", context.Background())
	err = r.Start(context.Background(), "t3")
	done()
	if err != nil {
		t.Fatalf("start of a created container: %v", err)
	}
	if _, err := os.Lstat(fifo); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the fifo is left after the start: %v", err)
	}
	if _, ok := m.starts.Load("t3"); ok {
		t.Error("the start's context is still named after it")
	}
	if len(next.started) != 3 {
		t.Errorf("ran %q, want the start answered in the shim", next.started)
	}
	next.started = next.started[:1]
	// The link back on the real runc (a create): every call runs it,
	// even one the front would answer.
	if err := relink(link, "/usr/sbin/runc"); err != nil {
		t.Fatal(err)
	}
	state2 := filepath.Join(root, "t2")
	if err := os.Mkdir(state2, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state2, "state.json"), []byte(st), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(context.Background(), "t2", nil); err == nil {
		t.Error("delete through the real runc: no error from a run that exited 7")
	}
	if len(next.started) != 2 || !strings.HasSuffix(next.started[1], "delete t2") {
		t.Errorf("ran %q, want the real runc run for the delete", next.started)
	}
	if _, err := os.Lstat(state2); err != nil {
		t.Errorf("the real runc's delete was answered in the shim: %v", err)
	}
}
