package hostfacts

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// TestRootfsHostDir: a directory is reached; a symlink in any component
// (the last one or one on the way) is ELOOP, never followed; a file is no
// directory.
func TestRootfsHostDir(t *testing.T) {
	d := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(d, "real", "snapshots", "1", "fs"), 0o700))
	must(os.Symlink(filepath.Join(d, "real"), filepath.Join(d, "link")))
	must(os.WriteFile(filepath.Join(d, "file"), nil, 0o600))
	h := &RootfsHost{}
	if err := h.Dir(filepath.Join(d, "real", "snapshots", "1", "fs")); err != nil {
		t.Fatalf("plain directory: %v", err)
	}
	for _, p := range []string{filepath.Join(d, "link"), filepath.Join(d, "link", "snapshots", "1", "fs")} {
		if err := h.Dir(p); !errors.Is(err, unix.ELOOP) {
			t.Errorf("Dir(%s) = %v, want ELOOP", p, err)
		}
		if _, err := h.Mounted(p); !errors.Is(err, unix.ELOOP) {
			t.Errorf("Mounted(%s) = %v, want ELOOP", p, err)
		}
	}
	if err := h.Dir(filepath.Join(d, "file")); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("Dir(file) = %v, want ENOTDIR", err)
	}
	// A directory inside a mount is not its root; /proc is.
	m, err := h.Mounted(filepath.Join(d, "real"))
	if err != nil || m.Root {
		t.Errorf("Mounted(tempdir) = %+v, %v; want not a mount's root", m, err)
	}
	if m, err := h.Mounted("/proc"); err != nil || !m.Root || m.Type != "proc" {
		t.Errorf("Mounted(/proc) = %+v, %v; want the root of a proc mount", m, err)
	}
}

// TestPlaceMount: the mount is found by id, not by name; a mount point
// whose mount shows a subtree (a bind of a directory) is not a root; what
// lies beneath is counted.
func TestPlaceMount(t *testing.T) {
	table := []*mountinfo.Info{
		{ID: 1, Mountpoint: "/", Root: "/", FSType: "ext4"},
		{ID: 7, Mountpoint: "/bk/merged", Root: "/", FSType: "overlay", VFSOptions: "rw,lowerdir=/l,upperdir=/u,workdir=/w"},
		{ID: 8, Mountpoint: "/bk/sub", Root: "/etc", FSType: "overlay"},
		{ID: 9, Mountpoint: "/bk/merged/proc", Root: "/", FSType: "proc"},
	}
	for _, tc := range []struct {
		p    string
		id   int
		want mountedWant
	}{
		{"/bk/merged", 7, mountedWant{true, "overlay", 1}},
		{"/bk/sub", 8, mountedWant{false, "overlay", 0}},
		{"/", 1, mountedWant{true, "ext4", 3}},
		{"/bk/merged", 1, mountedWant{false, "ext4", 1}}, // hidden: the path resolves to another mount
	} {
		got, err := placeMount(tc.p, tc.id, table)
		if err != nil || got.Root != tc.want.root || got.Type != tc.want.typ || got.Beneath != tc.want.beneath {
			t.Errorf("placeMount(%s, %d) = %+v, %v; want %+v", tc.p, tc.id, got, err, tc.want)
		}
	}
	if _, err := placeMount("/x", 99, table); err == nil {
		t.Errorf("placeMount of an unknown mount id: no error")
	}
}

type mountedWant struct {
	root    bool
	typ     string
	beneath int
}
