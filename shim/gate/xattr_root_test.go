package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// vfsCapV2 is a valid version-2 file capability blob (struct
// vfs_cap_data, little-endian): effective flag set, CAP_NET_BIND_SERVICE
// permitted. What `setcap cap_net_bind_service+ep` writes.
var vfsCapV2 = []byte{
	0x01, 0x00, 0x00, 0x02, // magic_etc: VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
	0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // data[0]: permitted 1<<10, inheritable 0
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // data[1]
}

// requireNoXattr asserts that the image's file at rel carries no
// extended attribute name, so a test's own change is the only difference.
func (o *ovl) requireNoXattr(t *testing.T, rel, name string) {
	t.Helper()
	if _, err := unix.Lgetxattr(filepath.Join(o.lowers[0], rel), name, nil); err != unix.ENODATA {
		t.Fatalf("image %s: %s is present or unreadable (%v): the baseline must not carry it", rel, name, err)
	}
}

// TestOverlayXattrOnlyCopyUpCounted: a copy-up whose bytes and metadata
// equal the image's but whose extended attributes differ (file
// capabilities added to an image binary, a user.* attribute, a trusted.*
// one on a symlink, an escaped overlay xattr set through the merged view,
// capabilities lost by a chown of an image binary that had them) counts as
// an unclaimed modify with the ordinary digest line.
func TestOverlayXattrOnlyCopyUpCounted(t *testing.T) {
	o := mountOverlay(t, hardened, func(t testing.TB, d string) {
		image(t, d)
		writeFile(t, d, "bin/ping", "\x7fELF ping", 0o755)
		must(t, os.Symlink("img.bin", filepath.Join(d, "lnk")))
		must(t, unix.Setxattr(filepath.Join(d, "bin/ping"), "security.capability", vfsCapV2, 0))
	})
	in := o.input(t)
	o.requireNoXattr(t, "img.bin", "security.capability")
	o.requireNoXattr(t, "etc/passwd", "user.test")

	// setcap on an image binary: the capability xattr is the whole change.
	must(t, unix.Setxattr(o.m("img.bin"), "security.capability", vfsCapV2, 0))
	must(t, unix.Setxattr(o.m("etc/passwd"), "user.test", []byte("1"), 0))
	must(t, unix.Lsetxattr(o.m("lnk"), "trusted.test", []byte("1"), 0))
	must(t, unix.Setxattr(o.m("ws/d/a"), "trusted.overlay.x", []byte("1"), 0)) // stored escaped in the upper
	must(t, os.Lchown(o.m("bin/ping"), 0, 0))                                  // clears security.capability
	for _, rel := range []string{"img.bin", "etc/passwd", "lnk", "ws/d/a", "bin/ping"} {
		o.backdate(t, rel)
		o.requireCopyUp(t, rel)
	}
	if _, err := unix.Getxattr(o.m("bin/ping"), "security.capability", nil); err != unix.ENODATA {
		t.Fatalf("chown to the same owner did not clear security.capability (%v): the test assumes it does", err)
	}

	res := runGate(t, in)
	want := []string{"/bin/ping", "/etc/passwd", "/img.bin", "/lnk", "/ws/d/a"}
	if res.Verdict != Pass || len(res.Anomalies) != 0 || res.Unclaimed.Count != int64(len(want)) || strings.Join(res.Unclaimed.Sample, ",") != strings.Join(want, ",") {
		t.Fatalf("verdict %s unclaimed %+v anomalies %+v: want %v counted", res.Verdict, res.Unclaimed, res.Anomalies, want)
	}
	if d := unclaimedDigest(want...); res.Unclaimed.Digest != d {
		t.Fatalf("unclaimed digest %s, want %s (modify lines)", res.Unclaimed.Digest, d)
	}
}

// TestOverlayXattrCopyUpNotCounted: copy-ups that keep the image's
// extended attributes are still no change: a chown to the same owner of a
// file without capabilities, an open for write of a binary with them
// (copied up with its capability), and a directory copied up to hold a
// change. The upper copies carry the mount's own trusted.overlay.* xattrs
// (origin, impure), which are not compared.
func TestOverlayXattrCopyUpNotCounted(t *testing.T) {
	o := mountOverlay(t, hardened, func(t testing.TB, d string) {
		image(t, d)
		writeFile(t, d, "bin/ping", "\x7fELF ping", 0o755)
		must(t, unix.Setxattr(filepath.Join(d, "bin/ping"), "security.capability", vfsCapV2, 0))
		must(t, unix.Setxattr(filepath.Join(d, "etc/passwd"), "user.keep", []byte("k"), 0))
		must(t, unix.Setxattr(filepath.Join(d, "ws/d"), "user.keep", []byte("k"), 0))
	})
	in := o.input(t)
	o.requireNoXattr(t, "img.bin", "security.capability")
	must(t, os.Lchown(o.m("img.bin"), 0, 0))
	must(t, os.Lchown(o.m("etc/passwd"), 0, 0))
	fd, err := unix.Open(o.m("bin/ping"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	unix.Close(fd)
	must(t, os.Chmod(o.m("ws/d"), 0o700))
	must(t, os.Chmod(o.m("ws/d"), 0o755))
	for _, rel := range []string{"img.bin", "etc/passwd", "bin/ping"} {
		o.requireCopyUp(t, rel)
	}
	if _, err := unix.Getxattr(filepath.Join(o.upper, "bin/ping"), "security.capability", nil); err != nil {
		t.Fatalf("open for write did not copy up bin/ping with its capability (%v)", err)
	}
	if n, _ := unix.Listxattr(filepath.Join(o.upper, "img.bin"), make([]byte, 4096)); n == 0 {
		t.Log("upper img.bin has no trusted.overlay.origin: the marker filter is not exercised")
	}
	res := runGate(t, in)
	if res.Verdict != Pass || res.Unclaimed.Count != 0 || len(res.Anomalies) != 0 {
		t.Fatalf("verdict %s unclaimed %+v anomalies %+v: copy-ups that keep the image's xattrs counted", res.Verdict, res.Unclaimed, res.Anomalies)
	}
}
