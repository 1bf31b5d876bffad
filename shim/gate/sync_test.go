package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// fakeSyncer records which sync SyncStaged chose, and on what.
type fakeSyncer struct {
	calls []string
	err   error
}

func (f *fakeSyncer) syncer() syncer {
	return syncer{
		tree: func(dir string) error { f.calls = append(f.calls, "tree "+dir); return f.err },
		fs:   func(dir string) error { f.calls = append(f.calls, "fs "+dir); return f.err },
	}
}

// stagedInput is a gate of one blob and a directory_tree of n files.
func stagedInput(t *testing.T, n int) Input {
	root, start := t.TempDir(), time.Now().Add(-time.Minute)
	writeFile(t, root, "ws/out/app.bin", "binary", 0o644)
	for i := range n {
		writeFile(t, root, fmt.Sprintf("ws/tree/f%d", i), "x", 0o644)
	}
	return bindInput(t, root, start,
		spec.Product{Class: spec.ClassBlob, Slot: "out/app.bin"},
		spec.Product{Class: spec.ClassDirectoryTree, Slot: "tree", MaxEntries: 2 * SyncFileLimit})
}

// The helper syncs the staging directory before it writes the result, so
// the shim may write the manifest naming the staged products at once.
func TestHelperSyncsStagedBeforeTheResult(t *testing.T) {
	for _, tc := range []struct {
		files int
		want  string
	}{{3, "tree"}, {SyncFileLimit, "fs"}} {
		in := stagedInput(t, tc.files)
		raw, _ := json.Marshal(in)
		var f fakeSyncer
		var stdout, stderr bytes.Buffer
		if code := helperMain(bytes.NewReader(raw), &stdout, &stderr, f.syncer()); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if want := []string{tc.want + " " + in.StagingDir}; fmt.Sprint(f.calls) != fmt.Sprint(want) {
			t.Fatalf("%d files: syncs %v, want %v", tc.files, f.calls, want)
		}
		var res Result
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Verdict != Pass {
			t.Fatalf("result %s: %v", stdout.Bytes(), err)
		}
	}
}

// A failed sync is a failed gate: exit 1, no result, nothing left staged.
func TestHelperSyncFailure(t *testing.T) {
	in := stagedInput(t, 1)
	raw, _ := json.Marshal(in)
	f := fakeSyncer{err: errors.New("EIO")}
	var stdout, stderr bytes.Buffer
	if code := helperMain(bytes.NewReader(raw), &stdout, &stderr, f.syncer()); code != 1 || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q", code, stdout.Bytes())
	}
	if !strings.Contains(stderr.String(), "make the staged products durable: EIO") {
		t.Fatalf("stderr %q", stderr.String())
	}
	if _, err := os.Stat(in.StagingDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging dir left after a failed sync: %v", err)
	}
}

// The real syncs, on whatever file system the test directory is on.
func TestSyncStagedReal(t *testing.T) {
	for _, files := range []int{2, SyncFileLimit + 1} {
		in := stagedInput(t, files)
		res := runGate(t, in)
		if err := SyncStaged(in.StagingDir, res); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(in.StagingDir, "out", "app.bin")); err != nil {
			t.Fatal(err)
		}
	}
}

// Both syncs on a staging directory that is a tmpfs of its own (root).
func TestSyncStagedTmpfs(t *testing.T) {
	roottest.Require(t)
	for _, files := range []int{2, SyncFileLimit + 1} {
		in := stagedInput(t, files)
		mnt := filepath.Dir(in.StagingDir)
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m,mode=0700"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
		if err := SyncStaged(in.StagingDir, runGate(t, in)); err != nil {
			t.Fatal(err)
		}
	}
}

// A gate that stages nothing makes no staging directory and syncs nothing;
// one whose failed product was staged and removed syncs the directory it
// made, so the removal is durable too.
func TestHelperNothingStaged(t *testing.T) {
	root, start := t.TempDir(), time.Now().Add(-time.Minute)
	in := bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "out/app.bin"})
	raw, _ := json.Marshal(in)
	var f fakeSyncer
	var stdout, stderr bytes.Buffer
	if code := helperMain(bytes.NewReader(raw), &stdout, &stderr, f.syncer()); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Verdict != Fail {
		t.Fatalf("result %s: %v (want a failed verdict: the product is missing)", stdout.Bytes(), err)
	}
	if len(f.calls) != 0 {
		t.Fatalf("syncs %v, want none", f.calls)
	}
	if _, err := os.Lstat(in.StagingDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging dir made with nothing staged: %v", err)
	}

	root, start = t.TempDir(), time.Now().Add(-time.Minute)
	writeFile(t, root, "ws/out/app.bin", "too big for its bound", 0o644)
	in = bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "out/app.bin", MaxBytes: 4})
	raw, _ = json.Marshal(in)
	f = fakeSyncer{}
	stdout.Reset()
	if code := helperMain(bytes.NewReader(raw), &stdout, &stderr, f.syncer()); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Lstat(in.StagingDir); err == nil {
		if want := []string{"tree " + in.StagingDir}; fmt.Sprint(f.calls) != fmt.Sprint(want) {
			t.Fatalf("syncs %v, want %v (the directory a failed product left)", f.calls, want)
		}
	} else if len(f.calls) != 0 {
		t.Fatalf("syncs %v with no staging directory", f.calls)
	}
}
