package gate

import (
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

// ovl is a real overlay mount built by a test: image layers (top first), an
// upperdir, and the merged view the "container" writes through.
type ovl struct {
	lowers              []string
	upper, work, merged string
}

// hardened are the options the shim forces at Create.
const hardened = "metacopy=off,redirect_dir=nofollow"

// mountOverlay builds one lower layer per builder (top first), ages every
// image entry to an hour ago, mounts the overlay with opts and unmounts it
// in t.Cleanup whether the test passed or not.
func mountOverlay(t testing.TB, opts string, layers ...func(t testing.TB, dir string)) *ovl {
	t.Helper()
	roottest.Require(t)
	base := t.TempDir()
	o := &ovl{upper: filepath.Join(base, "upper"), work: filepath.Join(base, "work"), merged: filepath.Join(base, "merged")}
	for i, build := range layers {
		d := filepath.Join(base, fmt.Sprintf("layer%d", i))
		mkdirAll(t, d, ".")
		build(t, d)
		ageTree(t, d)
		o.lowers = append(o.lowers, d)
	}
	for _, d := range []string{o.upper, o.work, o.merged} {
		mkdirAll(t, d, ".")
	}
	data := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,%s", strings.Join(o.lowers, ":"), o.upper, o.work, opts)
	if err := unix.Mount("overlay", o.merged, "overlay", 0, data); err != nil {
		t.Fatalf("mount overlay (%s): %v", data, err)
	}
	t.Cleanup(func() { unmount(t, o.merged) })
	return o
}

// unmount retries EBUSY on the real clock, about 1 s: the busy reference is
// the kernel's to drop, and a system call is nothing a synctest bubble's
// fake time could wait for.
func unmount(t testing.TB, dir string) {
	for i := 0; i < 50; i++ {
		err := unix.Unmount(dir, 0)
		if err == nil || err == unix.EINVAL || err == unix.ENOENT {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("unmount %s: still busy, detaching", dir)
	unix.Unmount(dir, unix.MNT_DETACH)
}

// ageTree sets every entry's times to an hour ago: image content predates
// the task.
func ageTree(t testing.TB, dir string) {
	old := unix.NsecToTimespec(time.Now().Add(-time.Hour).UnixNano())
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{old, old}, unix.AT_SYMLINK_NOFOLLOW)
		}
		return err
	})
}

// input gates the overlay with workspace /ws, starting the task now.
func (o *ovl) input(t testing.TB, products ...spec.Product) Input {
	return Input{
		UpperDir:   o.upper,
		LowerDirs:  o.lowers,
		Workspace:  "/ws",
		Products:   products,
		StagingDir: filepath.Join(t.TempDir(), "staged"),
		StartTime:  time.Now(),
	}
}

// m is a path in the merged view.
func (o *ovl) m(rel string) string { return filepath.Join(o.merged, filepath.FromSlash(rel)) }

func TestOverlayEveryClassPasses(t *testing.T) {
	o := mountOverlay(t, hardened, func(t testing.TB, d string) {
		writeFile(t, d, "ws/keep.txt", "keep", 0o644)
		writeFile(t, d, "ws/old.txt", "old", 0o644)
		writeFile(t, d, "ws/mod.txt", "v1", 0o644)
		writeFile(t, d, "ws/chmod.txt", "same", 0o644)
		mkdirAll(t, d, "ws/out")
		mkdirAll(t, d, "ws/emptyslot")
		writeFile(t, d, "img.txt", "image file", 0o644)
	})
	in := o.input(t,
		spec.Product{Class: spec.ClassBlob, Slot: "out/app.bin"},
		spec.Product{Class: spec.ClassBlobSet, Slot: "out/set", Modes: []string{"0644"}},
		spec.Product{Class: spec.ClassDirectoryTree, Slot: "out/site"},
		spec.Product{Class: spec.ClassDirectoryTree, Slot: "emptyslot"},
		spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"},
		spec.Product{Class: spec.ClassEnvironmentSnapshot, Slot: "out/env"},
		spec.Product{Class: spec.ClassWorkspacePatch, Slot: "changes.jsonl"},
	)
	writeFile(t, o.merged, "ws/out/app.bin", "\x7fELF...", 0o755)
	writeFile(t, o.merged, "ws/out/set/a", "a", 0o644)
	writeFile(t, o.merged, "ws/out/set/b", "b", 0o644)
	writeFile(t, o.merged, "ws/out/site/index.html", "<p>", 0o644)
	writeFile(t, o.merged, "ws/out/site/a/b/c.txt", "deep", 0o644)
	writeFile(t, o.merged, "ws/emptyslot/f", "f", 0o644)
	writeFile(t, o.merged, "ws/out/result.json", `{"status":"ok"}`, 0o644)
	writeFile(t, o.merged, "ws/out/env", "HOME=/root\n", 0o644)
	writeFile(t, o.merged, "ws/mod.txt", "v2", 0o644)
	os.Chmod(o.m("ws/chmod.txt"), 0o600)
	os.Remove(o.m("ws/old.txt"))
	writeFile(t, o.merged, "ws/newdir/f", "new", 0o644)
	writeFile(t, o.merged, "tmp/scratch", "scratch", 0o644)

	res := runGate(t, in)
	if res.Verdict != Pass || res.Layout != LayoutOverlay || res.XattrNS != "trusted" {
		t.Fatalf("verdict %s layout %s ns %s: products %+v anomalies %+v", res.Verdict, res.Layout, res.XattrNS, res.Products, res.Anomalies)
	}
	for _, s := range []string{"out/app.bin", "out/set", "out/site", "emptyslot", "out/result.json", "out/env", "changes.jsonl"} {
		requirePass(t, res, s)
	}
	lines := readPatch(t, productOf(t, res, "changes.jsonl").Staged)
	if lines["old.txt"] != "delete::" {
		t.Errorf("whiteout of old.txt not recorded as a deletion: %q", lines["old.txt"])
	}
	if lines["mod.txt"] != "v2" || lines["newdir/f"] != "new" || lines["newdir"] != "add:dir:" {
		t.Errorf("patch lines: %q", lines)
	}
	if lines["chmod.txt"] != "same" {
		t.Errorf("chmod'ed file not in the patch: %q", lines["chmod.txt"])
	}
	for _, p := range []string{"keep.txt", "out", "."} {
		if _, ok := lines[p]; ok {
			t.Errorf("patch lists unchanged %s", p)
		}
	}
	if res.Unclaimed.Count != 2 || strings.Join(res.Unclaimed.Sample, ",") != "/tmp,/tmp/scratch" {
		t.Errorf("unclaimed %+v", res.Unclaimed)
	}
}

// TestOverlayImageLayers checks whiteouts and opaque directories inside the
// image itself (two lower layers).
func TestOverlayImageLayers(t *testing.T) {
	o := mountOverlay(t, hardened,
		func(t testing.TB, d string) { // top layer
			mkdirAll(t, d, "ws/out")
			if err := unix.Mknod(filepath.Join(d, "ws/out/r.json"), unix.S_IFCHR, 0); err != nil {
				t.Fatal(err)
			}
			mkdirAll(t, d, "ws/d")
			if err := unix.Setxattr(filepath.Join(d, "ws/d"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
				t.Fatal(err)
			}
		},
		func(t testing.TB, d string) { // bottom layer
			writeFile(t, d, "ws/out/r.json", `{"stale":true}`, 0o644)
			writeFile(t, d, "ws/d/hidden", "x", 0o644)
		})
	in := o.input(t,
		spec.Product{Class: spec.ClassStructuredResult, Slot: "out/r.json"},
		spec.Product{Class: spec.ClassDirectoryTree, Slot: "d"})
	p := writeFile(t, o.merged, "ws/out/r.json", `{"fresh":true}`, 0o644)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(p, old, old) // not in the image, so its mtime does not matter
	writeFile(t, o.merged, "ws/d/new", "n", 0o644)
	res := runGate(t, in)
	requirePass(t, res, "out/r.json")
	requirePass(t, res, "d")
}
