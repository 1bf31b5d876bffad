package gate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

func TestMountAt(t *testing.T) {
	under := &mountinfo.Info{Mountpoint: "/m", FSType: "overlay", Root: "/"}
	top := &mountinfo.Info{Mountpoint: "/m", FSType: "ext4", Root: "/"}
	table := []*mountinfo.Info{{Mountpoint: "/", FSType: "ext4", Root: "/"}, under, {Mountpoint: "/m/sub", FSType: "tmpfs"}, top}
	if got := MountAt("/m", table); got != top {
		t.Errorf("MountAt(/m) = %+v, want the topmost", got)
	}
	if got := MountAt("/m/none", table); got != nil {
		t.Errorf("MountAt(/m/none) = %+v, want nil (nothing mounted there)", got)
	}
	if !OverlayRoot(under) || OverlayRoot(top) || OverlayRoot(nil) || OverlayRoot(&mountinfo.Info{FSType: "overlay", Root: "/sub"}) {
		t.Error("OverlayRoot: only an overlay's own root")
	}
}

func TestReadOverlay(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{"l1/diff", "l2/diff", "up/diff"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(home, "l"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../l1/diff", filepath.Join(home, "l", "AAA")); err != nil {
		t.Fatal(err)
	}
	upper := filepath.Join(home, "up", "diff")
	for _, tc := range []struct {
		name, opts string
		want       OverlayDirs
		err        string
	}{
		{"absolute", "rw,lowerdir=/a:/b,upperdir=/u,workdir=/w,userxattr", OverlayDirs{Upper: "/u", Work: "/w", Lowers: []string{"/a", "/b"}, UserXattr: true}, ""},
		{"relative, through containers/storage's l/ links", "rw,lowerdir=l/AAA:" + filepath.Join(home, "l2", "diff") + ",upperdir=" + upper,
			OverlayDirs{Upper: upper, Lowers: []string{filepath.Join(home, "l1", "diff"), filepath.Join(home, "l2", "diff")}}, ""},
		{"the kernel's escapes", `rw,lowerdir=/a\040b:/c\134:d,upperdir=/u`, OverlayDirs{Upper: "/u", Lowers: []string{"/a b", "/c:d"}}, ""},
		{"read-only", "ro,lowerdir=/a:/b", OverlayDirs{}, "read-only overlay"},
		{"no lowerdir", "rw,upperdir=/u", OverlayDirs{}, "without lowerdirs"},
		{"metacopy", "rw,lowerdir=/a,upperdir=/u,metacopy=on", OverlayDirs{}, "metacopy=on"},
		{"data-only", "rw,lowerdir=/a::/d,upperdir=/u", OverlayDirs{}, "data-only"},
		{"relative upperdir", "rw,lowerdir=/a,upperdir=u", OverlayDirs{}, "not absolute"},
	} {
		got, err := ReadOverlay(&mountinfo.Info{FSType: "overlay", Root: "/", VFSOptions: tc.opts})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestJoinLowers(t *testing.T) {
	for _, parts := range [][]string{{"/a", "/b"}, {"/a:b", `/c\d`}, {"/a", "", "/d"}} {
		if got := splitLowers(joinLowers(parts)); !reflect.DeepEqual(got, parts) {
			t.Errorf("splitLowers(joinLowers(%q)) = %q", parts, got)
		}
	}
}
