package service

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	runcshim "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/runc"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
	runc "github.com/containerd/go-runc"
)

// stopBundle lays out what `shim delete` finds of a container the shim
// deleted: a bundle under a task dir, the runc options naming a runc root,
// the recorded exit (or, with noExit, only init.pid), and a runtime that
// notes each run of it instead of running runc.
func stopBundle(t *testing.T, id string, noExit bool) (bundle, root, ran string) {
	t.Helper()
	tmp := t.TempDir()
	bundle, root, ran = filepath.Join(tmp, "task", id), filepath.Join(tmp, "runc"), filepath.Join(tmp, "ran")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(tmp, "fake-runc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$@\" >>"+ran+"\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := runcshim.WriteRuntime(bundle, fake); err != nil {
		t.Fatal(err)
	}
	if err := runcshim.WriteOptions(bundle, &options.Options{Root: root}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "init.pid"), []byte("4242"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !noExit {
		if err := runcshim.WriteExitStatus(bundle, runc.Exit{Pid: 4242, Status: 3, Timestamp: time.Unix(1700000000, 5).UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(bundle)
	return bundle, root, ran
}

// TestStopDeletedMatchesRunc checks that `shim delete` for a container
// runc no longer knows skips runc and answers what the runc manager's Stop
// answers for the same bundle, and that a container runc still has state
// for goes through the runc manager (its runc delete runs).
func TestStopDeletedMatchesRunc(t *testing.T) {
	ctx := namespaces.WithNamespace(context.Background(), "demo")
	m := NewManager(RuntimeName)
	for _, noExit := range []bool{false, true} {
		_, _, ran := stopBundle(t, "c1", noExit)
		got, err := m.Stop(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(ran); !os.IsNotExist(err) {
			t.Fatalf("noExit=%v: runc ran for a container it has no state for (%v)", noExit, err)
		}
		want, err := m.runc.Stop(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(ran); err != nil {
			t.Fatalf("the runc manager's Stop did not run the runtime: %v", err)
		}
		if noExit { // both fall back to now
			if got.Pid != want.Pid || got.ExitStatus != want.ExitStatus || got.ExitedAt.IsZero() {
				t.Fatalf("noExit: got %+v, runc manager %+v", got, want)
			}
			continue
		}
		if got != want {
			t.Fatalf("got %+v, runc manager %+v", got, want)
		}
		if got != (shim.StopStatus{Pid: 4242, ExitStatus: 3, ExitedAt: time.Unix(1700000000, 5).UTC()}) {
			t.Fatalf("got %+v, want the recorded exit", got)
		}
	}

	// runc still has state: the runc manager's Stop, runc delete and all.
	_, root, ran := stopBundle(t, "c2", false)
	if err := os.MkdirAll(filepath.Join(root, "demo", "c2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stop(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatalf("runc did not run for a container it has state for: %v", err)
	}
	if want := "--root " + filepath.Join(root, "demo"); !strings.Contains(string(b), want) || !strings.Contains(string(b), "delete --force c2") {
		t.Fatalf("runc ran as %q, want %q ... delete --force c2", b, want)
	}
}
