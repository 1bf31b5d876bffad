package kerneltest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
)

// Cgroup is a test cgroup under the cgroup2 mount.
type Cgroup struct {
	H    cgroup.Hierarchy
	Path string // in the hierarchy: /gensee-test-<random>
	Dir  string // its directory under H.Mountpoint
}

// NewCgroup makes /gensee-test-<random> in the cgroup2 hierarchy and, at
// cleanup, drains and removes it.
func NewCgroup(t testing.TB) *Cgroup {
	t.Helper()
	h, err := cgroup.Find()
	if err != nil {
		t.Fatal(err)
	}
	p := "/gensee-test-" + RandHex(4)
	return &Cgroup{H: h, Path: p, Dir: MakeCgroup(t, h, p)}
}

// MakeCgroup makes cgroup p in h and, at cleanup, drains and removes it.
// It returns p's directory. Make a parent before its children: cleanups run
// last-in first-out.
func MakeCgroup(t testing.TB, h cgroup.Hierarchy, p string) string {
	t.Helper()
	dir, err := h.Dir(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make cgroup: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := h.Drain(ctx, p); err != nil {
			t.Errorf("cleanup: drain %s: %v", p, err)
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("cleanup: rmdir %s: %v", dir, err)
		}
	})
	return dir
}

// IntoCgroup makes cmd start directly inside the cgroup at directory dir
// (CLONE_INTO_CGROUP): it is there before it runs any code or opens any
// socket. The directory stays open until cleanup. Safe to call from other
// goroutines than the test's.
func IntoCgroup(t testing.TB, cmd *exec.Cmd, dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open cgroup: %w", err)
	}
	t.Cleanup(func() { f.Close() })
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(f.Fd())
	return nil
}

// Sandbox is one fresh namespace and one test cgroup; Sh runs clients
// inside both.
type Sandbox struct {
	NS *Netns
	CG *Cgroup
}

// NewSandbox makes a namespace, then a cgroup; cleanup removes them in
// reverse.
func NewSandbox(t testing.TB) *Sandbox {
	t.Helper()
	return &Sandbox{NS: NewNetns(t), CG: NewCgroup(t)}
}

// Sh runs a bash script inside the cgroup (placed there at clone) and the
// namespace (nsenter), killed after 20 seconds, and returns its combined
// output; failures of the script are the test's to judge.
func (s *Sandbox) Sh(t testing.TB, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+s.NS.Path, "bash", "-c", script)
	if err := IntoCgroup(t, cmd, s.CG.Dir); err != nil {
		t.Fatal(err)
	}
	out, _ := cmd.CombinedOutput()
	return string(out)
}
