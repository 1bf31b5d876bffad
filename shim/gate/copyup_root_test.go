package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// backdate sets a merged-view entry's atime and mtime to those of the same
// path in the image (lower layer 0), without following a symlink: what
// `touch -d @<old>` or utimensat does to hide a write.
func (o *ovl) backdate(t *testing.T, rel string) {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(filepath.Join(o.lowers[0], rel), &st))
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, o.m(rel), []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW))
}

// requireCopyUp asserts that rel was copied up and that its upper copy has
// exactly the image's mode, owner, size and mtime: the case metadata alone
// would call a copy-up.
func (o *ovl) requireCopyUp(t *testing.T, rel string) {
	t.Helper()
	var up, img unix.Stat_t
	must(t, unix.Lstat(filepath.Join(o.upper, rel), &up))
	must(t, unix.Lstat(filepath.Join(o.lowers[0], rel), &img))
	if up.Mode != img.Mode || up.Uid != img.Uid || up.Gid != img.Gid || up.Size != img.Size || up.Mtim != img.Mtim {
		t.Fatalf("%s: upper copy's metadata differs from the image's (mode %o/%o size %d/%d mtime %v/%v): the test does not exercise a same-metadata copy-up",
			rel, up.Mode, img.Mode, up.Size, img.Size, up.Mtim, img.Mtim)
	}
}

// TestOverlayBackdatedWriteCounted: new bytes of the same length (a new
// symlink target, a new device number), mtime set back to the image's, must
// still count as an unclaimed modification.
func TestOverlayBackdatedWriteCounted(t *testing.T) {
	o := mountOverlay(t, hardened, func(t testing.TB, d string) {
		image(t, d)
		must(t, os.Symlink("img.bin", filepath.Join(d, "lnk")))
		must(t, unix.Mknod(filepath.Join(d, "etc/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(t, unix.Chmod(filepath.Join(d, "etc/null"), 0o666))
	})
	in := o.input(t)
	writeFile(t, o.merged, "etc/passwd", "evil:x:0:0::/root:/bin/sh\n", 0o644)
	o.backdate(t, "etc/passwd")
	o.requireCopyUp(t, "etc/passwd")
	must(t, os.Remove(o.m("lnk")))
	must(t, os.Symlink("img.xyz", o.m("lnk")))
	o.backdate(t, "lnk")
	o.requireCopyUp(t, "lnk")
	must(t, os.Remove(o.m("etc/null")))
	must(t, unix.Mknod(o.m("etc/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 1)))) // /dev/mem
	must(t, unix.Chmod(o.m("etc/null"), 0o666))
	o.backdate(t, "etc/null")
	o.requireCopyUp(t, "etc/null")

	res := runGate(t, in)
	want := []string{"/etc/null", "/etc/passwd", "/lnk"}
	if res.Verdict != Pass || res.Unclaimed.Count != 3 || strings.Join(res.Unclaimed.Sample, ",") != strings.Join(want, ",") {
		t.Fatalf("verdict %s unclaimed %+v anomalies %+v: want %v counted", res.Verdict, res.Unclaimed, res.Anomalies, want)
	}
	if d := unclaimedDigest(want...); res.Unclaimed.Digest != d {
		t.Fatalf("unclaimed digest %s, want %s (modify lines)", res.Unclaimed.Digest, d)
	}
}

// TestOverlayCopyUpOnlyNotCounted: copy-ups that keep the image's bytes and
// metadata (open for write without writing, chmod and back, chown to the
// same owner) are still no change, after the content compare.
func TestOverlayCopyUpOnlyNotCounted(t *testing.T) {
	o := mountOverlay(t, hardened, image)
	in := o.input(t)
	fd, err := unix.Open(o.m("etc/passwd"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	unix.Close(fd)
	must(t, os.Chmod(o.m("img.bin"), 0o600))
	must(t, os.Chmod(o.m("img.bin"), 0o644))
	must(t, os.Lchown(o.m("ws/d/a"), 0, 0))
	for _, rel := range []string{"etc/passwd", "img.bin", "ws/d/a"} {
		o.requireCopyUp(t, rel)
	}
	res := runGate(t, in)
	if res.Verdict != Pass || res.Unclaimed.Count != 0 {
		t.Fatalf("verdict %s unclaimed %+v anomalies %+v: pure copy-ups counted as changes", res.Verdict, res.Unclaimed, res.Anomalies)
	}
}

// TestOverlayBackdatedSlot: a slot the image has, rewritten with its mtime
// set back, stays refused (partial) and the detail says why; the workspace
// patch carries the same kind of rewrite as a modify line.
func TestOverlayBackdatedSlot(t *testing.T) {
	o := mountOverlay(t, hardened, image)
	in := o.input(t,
		spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"},
		spec.Product{Class: spec.ClassWorkspacePatch, Slot: "p"})
	writeFile(t, o.merged, "ws/out/result.json", `{"from":"tasks"}`, 0o644)
	writeFile(t, o.merged, "ws/d/a", "b", 0o644)
	for _, rel := range []string{"ws/out/result.json", "ws/d/a"} {
		o.backdate(t, rel)
		o.requireCopyUp(t, rel)
	}
	res := runGate(t, in)
	p := requireRule(t, res, "out/result.json", RulePartial)
	if d := p.Violations[0].Detail; !strings.Contains(d, "set back") || strings.Contains(d, "copy-up only") {
		t.Errorf("partial detail %q: want it to name a backdated write, not a copy-up only", d)
	}
	patch := productOf(t, res, "p")
	if patch.Verdict != Pass {
		t.Fatalf("patch %+v", patch)
	}
	ops := map[string]string{}
	for _, e := range patch.Entries {
		ops[e.Path] = e.Op
	}
	if lines := readPatch(t, patch.Staged); ops["d/a"] != "modify" || lines["d/a"] != "b" {
		t.Fatalf("backdated rewrite of d/a is not a modify line in the patch: ops %q", ops)
	}
}
