package cgroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/moby/sys/mountinfo"
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

// TestRootKillTrees: an escaped process and its child (found below it, not
// asked for) are stopped and killed through pidfds; a pid whose start time
// does not match is never signalled.
func TestRootKillTrees(t *testing.T) {
	roottest.Require(t)
	h, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := h.Dir(testCgroup(t, h))
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sh := exec.Command("sh", "-c", "sleep 600 & wait")
	sh.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Process.Kill(); _ = sh.Wait() })
	var child int
	// Real time, bounded: sh forks a real process, which no synctest
	// bubble holds.
	for deadline := time.Now().Add(2 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no child of sh")
		}
		if kids, _ := children(sh.Process.Pid); len(kids) == 1 {
			child = kids[0]
		}
	}
	other := startIn(t, dir)
	st, err := ReadStat(sh.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ost, _ := ReadStat(other.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := KillTrees(ctx, []Proc{{PID: sh.Process.Pid, Start: st.Start}, {PID: other.Process.Pid, Start: ost.Start + 1}})
	if len(got) != 3 {
		t.Fatalf("KillTrees = %+v, want sh, the stale pid, sh's child", got)
	}
	if !got[0].Killed || got[0].Err != nil || got[0].Cgroup == "" {
		t.Errorf("sh: %+v", got[0])
	}
	if got[1].Killed || !errors.Is(got[1].Err, ErrGone) {
		t.Errorf("stale start time: %+v, want ErrGone and not killed", got[1])
	}
	if got[2].PID != child || got[2].Parent != sh.Process.Pid || !got[2].Killed {
		t.Errorf("child: %+v, want pid %d under %d, killed", got[2], child, sh.Process.Pid)
	}
	if err := unix.Kill(other.Process.Pid, 0); err != nil {
		t.Errorf("the process with another start time was signalled: %v", err)
	}
	if err := sh.Wait(); err == nil {
		t.Error("sh exited cleanly, want SIGKILL")
	}
}

func TestRootListPIDs(t *testing.T) {
	roottest.Require(t)
	pids, err := ListPIDs()
	if err != nil || !slices.Contains(pids, os.Getpid()) || !slices.Contains(pids, 1) {
		t.Fatalf("ListPIDs = %d pids, %v; want it to hold 1 and %d", len(pids), err, os.Getpid())
	}
}

// TestRootFindKeeps: on this host's cgroup2 mount, statx's mount id is
// the mount table's, so Find keeps the mount's unique id and reads the
// table once.
func TestRootFindKeeps(t *testing.T) {
	roottest.Require(t)
	reads := 0
	old := getMounts
	getMounts = func(f mountinfo.FilterFunc) ([]*mountinfo.Info, error) { reads++; return old(f) }
	found.h, found.unique = Hierarchy{}, 0
	t.Cleanup(func() { getMounts = old; found.h, found.unique = Hierarchy{}, 0 })
	first, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Find()
	if err != nil || again != first || reads != 1 {
		t.Fatalf("second Find = %+v, %v after %d reads; want %+v after one", again, err, reads, first)
	}
}

// TestRootFindRemounted: in a private mount namespace (a child of the
// test, under unshare -m), the cgroup2 mount is unmounted and a tmpfs
// mounted in its place, which the kernel may give the same reusable mount
// id: Find must not give the kept hierarchy again.
func TestRootFindRemounted(t *testing.T) {
	roottest.Require(t)
	if os.Getenv("GENSEE_FIND_REMOUNT_CHILD") == "1" {
		findRemountedChild(t)
		return
	}
	cmd := exec.Command("unshare", "-m", "--propagation", "private", os.Args[0], "-test.run=^TestRootFindRemounted$", "-test.v")
	cmd.Env = append(os.Environ(), "GENSEE_FIND_REMOUNT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRootFindRemounted") {
		t.Fatalf("child in a private mount namespace: %v\n%s", err, out)
	}
}

func findRemountedChild(t *testing.T) {
	// Every thread of this process is in the private namespace unshare
	// made before exec, so statx on any thread sees its mounts.
	first, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(first.Mountpoint, unix.MNT_DETACH); err != nil {
		t.Fatalf("unmount %s: %v", first.Mountpoint, err)
	}
	if err := unix.Mount("none", first.Mountpoint, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", first.Mountpoint, err)
	}
	if again, err := Find(); err == nil && again == first {
		var st unix.Statfs_t
		unix.Statfs(first.Mountpoint, &st)
		t.Fatalf("Find kept %+v after the mount there was replaced (now fs type %#x)", first, st.Type)
	}
}
