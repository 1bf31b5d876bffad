package cgroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/roottest"
	"golang.org/x/sys/unix"
)

// testCgroup makes /gensee-test-<rand> (and any sub paths) and removes them,
// drained, at cleanup.
func testCgroup(t *testing.T, h Hierarchy, subs ...string) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	p := "/gensee-test-" + hex.EncodeToString(b)
	dir, err := h.Dir(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make test cgroup: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := drain(ctx, dir, true); err != nil {
			t.Errorf("cleanup drain: %v", err)
		}
		for i := len(subs) - 1; i >= 0; i-- {
			_ = os.Remove(filepath.Join(dir, subs[i]))
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("cleanup rmdir %s: %v", dir, err)
		}
	})
	for _, s := range subs {
		if err := os.Mkdir(filepath.Join(dir, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// startIn starts `sleep 600` directly inside cgroup dir (CLONE_INTO_CGROUP).
func startIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start in %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestRootIDAndPath(t *testing.T) {
	roottest.Require(t)
	h, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	p := testCgroup(t, h)
	dir, _ := h.Dir(p)
	id, err := h.ID(p)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if id != st.Ino || id == 0 {
		t.Fatalf("ID = %d, inode = %d", id, st.Ino)
	}
	cmd := startIn(t, dir)
	got, err := PathOf(cmd.Process.Pid)
	if err != nil || got != p {
		t.Fatalf("PathOf = %q, %v; want %q", got, err, p)
	}
	if Level(got) != 1 {
		t.Fatalf("Level(%q) = %d", got, Level(got))
	}
}

func TestRootDrain(t *testing.T) {
	roottest.Require(t)
	h, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	for _, useKill := range []bool{true, false} {
		name := "cgroup.kill"
		if !useKill {
			name = "freeze+SIGKILL"
		}
		t.Run(name, func(t *testing.T) {
			p := testCgroup(t, h, "child")
			dir, _ := h.Dir(p)
			var cmds []*exec.Cmd
			for _, d := range []string{dir, dir, filepath.Join(dir, "child")} {
				cmds = append(cmds, startIn(t, d))
			}
			if pop, err := h.Populated(p); err != nil || !pop {
				t.Fatalf("Populated = %v, %v; want true", pop, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			killed, err := drain(ctx, dir, useKill)
			if err != nil {
				t.Fatal(err)
			}
			if killed != 3 {
				t.Errorf("killed = %d, want 3", killed)
			}
			if pop, err := h.Populated(p); err != nil || pop {
				t.Fatalf("after drain Populated = %v, %v; want false", pop, err)
			}
			for _, c := range cmds {
				err := c.Wait()
				if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Errorf("pid %d: wait = %v, want killed by SIGKILL", c.Process.Pid, err)
				}
			}
			// An empty cgroup drains to zero without error.
			if killed, err := h.Drain(ctx, p); err != nil || killed != 0 {
				t.Errorf("second drain = %d, %v", killed, err)
			}
		})
	}
}
