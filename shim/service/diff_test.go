package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

// TestBindDiffSource: a bind of a mounted overlay's root is gated as that
// overlay (no diff when its options cannot be read or it is read-only);
// anything else is gated as the directory it is.
func TestBindDiffSource(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	merged := filepath.Join(dir, "merged")
	sub := filepath.Join(merged, "sub")
	for _, d := range []string{sub, filepath.Join(dir, "plain")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := &mountinfo.Info{Mountpoint: "/", Root: "/", FSType: "ext4", VFSOptions: "rw"}
	ovl := &mountinfo.Info{Mountpoint: merged, Root: "/", FSType: "overlay",
		VFSOptions: "rw,lowerdir=/s/2/fs:/s/1/fs,upperdir=/s/3/fs,workdir=/s/3/work"}
	cases := []struct {
		name, source string
		table        []*mountinfo.Info
		want         diffSource
		problem      string
	}{
		{"overlay root", merged, []*mountinfo.Info{root, ovl}, diffSource{Upper: "/s/3/fs", Lowers: []string{"/s/2/fs", "/s/1/fs"}, BindOf: merged}, ""},
		{"plain directory", filepath.Join(dir, "plain"), []*mountinfo.Info{root, ovl}, diffSource{Root: filepath.Join(dir, "plain")}, ""},
		{"inside an overlay", sub, []*mountinfo.Info{root, ovl}, diffSource{Root: sub}, ""},
		{"bind of an overlay subdirectory", merged, []*mountinfo.Info{root, {Mountpoint: merged, Root: "/sub", FSType: "overlay", VFSOptions: ovl.VFSOptions}}, diffSource{Root: merged}, ""},
		{"unreadable overlay options", merged, []*mountinfo.Info{root, {Mountpoint: merged, Root: "/", FSType: "overlay", VFSOptions: "rw,lowerdir=/a,datadir+=/d,upperdir=/u"}}, diffSource{}, "data-only"},
		{"read-only overlay", merged, []*mountinfo.Info{root, {Mountpoint: merged, Root: "/", FSType: "overlay", VFSOptions: "ro,lowerdir=/a:/b"}}, diffSource{}, "read-only overlay"},
		{"topmost mount wins", merged, []*mountinfo.Info{root, ovl, {Mountpoint: merged, Root: "/x", FSType: "ext4"}}, diffSource{Root: merged}, ""},
		{"missing source", filepath.Join(dir, "gone"), []*mountinfo.Info{root}, diffSource{}, "no such file"},
	}
	for _, tc := range cases {
		got := bindDiffSource(tc.source, tc.table)
		if tc.problem != "" {
			if !strings.Contains(got.Problem, tc.problem) {
				t.Errorf("%s: problem %q, want it to mention %q", tc.name, got.Problem, tc.problem)
			}
			continue
		}
		if got.Problem != "" || got.Upper != tc.want.Upper || got.Root != tc.want.Root || got.BindOf != tc.want.BindOf ||
			strings.Join(got.Lowers, ":") != strings.Join(tc.want.Lowers, ":") {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
