package service

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/log"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// ownRootfs mounts a tmpfs at the fixture's bundle rootfs, as if the shim
// had mounted the task's snapshot there (root only).
func ownRootfs(t *testing.T, f *fixture) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting the rootfs needs root")
	}
	root := filepath.Join(f.op.bundle, "rootfs")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, ""); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	f.op.ownRootfs = true
	return root
}

func isMounted(t *testing.T, p string) bool {
	t.Helper()
	ok, err := mountinfo.Mounted(p)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// exitInit lets the fixture's init exit with status, and forwards its
// TaskExit as the inner service does.
func exitInit(f *fixture, status uint32) {
	close(f.inner.exit)
	f.s.pub.Publish(context.Background(), "/tasks/exit", &eventstypes.TaskExit{ContainerID: "c1", ID: "c1", ExitStatus: status})
}

// runToExit starts the fixture's task, lets its init exit, and waits for
// Wait's answer: the exit path has released.
func runToExit(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	exitInit(f, 0)
	if _, err := f.s.Wait(ctx, &taskAPI.WaitRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
}

// The exit path's release unmounts the rootfs the shim mounted, before
// Delete; a spec with hooks keeps it mounted for runc's delete (its
// poststop hooks), and Delete unmounts it after; a task that never
// started keeps it until Delete.
func TestReleaseUnmountsRootfs(t *testing.T) {
	ctx := context.Background()
	t.Run("no hooks", func(t *testing.T) {
		f := newFixture(t, 0)
		root := ownRootfs(t, f)
		runToExit(t, f)
		if f.op.unmounting == nil {
			t.Fatal("the release started no unmount")
		}
		<-f.op.unmounting
		if !f.op.unmountedOK || isMounted(t, root) {
			t.Fatalf("rootfs still mounted after the release (ok %v)", f.op.unmountedOK)
		}
		if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Delete waits for it", func(t *testing.T) {
		f := newFixture(t, 0)
		ownRootfs(t, f)
		runToExit(t, f)
		<-f.op.unmounting
		slow := make(chan struct{}) // an unmount still in flight when Delete comes
		f.op.unmounting = slow
		deleted := make(chan error, 1)
		go func() {
			_, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"})
			deleted <- err
		}()
		select {
		case err := <-deleted:
			t.Fatalf("Delete answered (%v) before the release's unmount finished", err)
		case <-time.After(100 * time.Millisecond):
		}
		close(slow)
		if err := <-deleted; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("hooks", func(t *testing.T) {
		f := newFixture(t, 0)
		root := ownRootfs(t, f)
		f.op.specHooks = true
		mountedAtDelete := false
		f.inner.onDelete = func() { mountedAtDelete = isMounted(t, root) }
		runToExit(t, f)
		if f.op.unmounting != nil {
			t.Fatal("the release unmounts a rootfs the spec's hooks run on")
		}
		if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if !mountedAtDelete {
			t.Fatal("the rootfs was gone when runc's delete (poststop hooks) ran")
		}
		if isMounted(t, root) {
			t.Fatal("rootfs left mounted after Delete")
		}
	})
	t.Run("never started", func(t *testing.T) {
		f := newFixture(t, 0)
		root := ownRootfs(t, f)
		mountedAtDelete := false
		f.inner.onDelete = func() { mountedAtDelete = isMounted(t, root) }
		if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if !mountedAtDelete || f.op.unmounting != nil {
			t.Fatal("a task that never started lost its rootfs before the inner Delete (its init is blocked in runc init on it)")
		}
		if isMounted(t, root) {
			t.Fatal("rootfs left mounted after Delete")
		}
	})
}

// An unmount at the release that fails (the mount busy) is done again by
// Delete; a Delete whose inner Delete failed is retried and unmounts.
func TestReleaseUnmountRetried(t *testing.T) {
	f := newFixture(t, 0)
	root := ownRootfs(t, f)
	hold := exec.Command("/bin/sleep", "30")
	hold.Dir = root
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { hold.Process.Kill(); hold.Wait() }()
	f.inner.deleteErr = errors.New("inner delete failed")
	runToExit(t, f)
	<-f.op.unmounting
	if f.op.unmountedOK || !isMounted(t, root) {
		t.Fatalf("a busy rootfs was unmounted at the release (ok %v)", f.op.unmountedOK)
	}
	ctx := context.Background()
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err == nil {
		t.Fatal("Delete answered although the inner Delete failed")
	}
	hold.Process.Kill()
	hold.Wait()
	f.inner.deleteErr = nil
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if isMounted(t, root) {
		t.Fatal("rootfs left mounted after the retried Delete")
	}
}

// The warm helper as Start and the exit path drive it: an init that exits
// at once gets none (its exit stops the start armed by Start); one still
// running past warmAfter gets one, which Delete lets go; a failed Start
// never starts one.
func TestWarmGateWiring(t *testing.T) {
	reapChildren(t)
	useHelper(t, warmHelperScript)
	ctx := context.Background()
	state := func(w *warmGate) (started, dropped bool, h *gateHelper) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.ready != nil, w.dropped, w.h
	}
	t.Run("short", func(t *testing.T) {
		f := newFixture(t, 0)
		f.op.warm = newWarmGate(log.L)
		f.inner.onStart = func() { go exitInit(f, 0) } // gone as Start returns
		if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.Wait(ctx, &taskAPI.WaitRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		// The exit was seen within warmAfter of Start (unless this
		// machine stalled the exit path that long): nothing started,
		// and nothing will.
		if started, dropped, _ := state(f.op.warm); !started && !dropped {
			t.Fatal("the init's exit left the warm helper's start armed")
		}
		time.Sleep(5 * warmAfter)
		if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("running", func(t *testing.T) {
		f := newFixture(t, 0)
		f.op.warm = newWarmGate(log.L)
		began := make(chan time.Time, 1) // when the helper's command is made, in its spawn
		command := gateHelperCommand
		gateHelperCommand = func() (*exec.Cmd, func(), error) {
			select {
			case began <- time.Now():
			default:
			}
			return command()
		}
		t.Cleanup(func() { gateHelperCommand = command })
		beforeStart := time.Now() // Start arms the spawn after this
		if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		ready := spawning(t, f.op.warm)
		if ready == nil {
			t.Fatal("no warm helper started for a running task")
		}
		<-ready
		if took := (<-began).Sub(beforeStart); took < warmAfter {
			t.Fatalf("the warm helper started %s after Start armed it, before warmAfter", took)
		}
		_, _, h := state(f.op.warm)
		if h == nil {
			t.Fatal("no warm helper")
		}
		exitInit(f, 0)
		if _, err := f.s.Wait(ctx, &taskAPI.WaitRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if _, dropped, left := state(f.op.warm); !dropped || left != nil {
			t.Fatal("Delete did not let the warm helper go")
		}
		select {
		case <-h.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("the warm helper Delete let go still runs")
		}
	})
	t.Run("failed start", func(t *testing.T) {
		f := newFixture(t, 0)
		f.op.warm = newWarmGate(log.L)
		f.inner.startErr = errors.New("runc start failed")
		if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err == nil {
			t.Fatal("Start answered although the inner Start failed")
		}
		time.Sleep(5 * warmAfter)
		if started, dropped, _ := state(f.op.warm); started || !dropped {
			t.Fatal("a failed Start left the warm helper to start")
		}
	})
}
