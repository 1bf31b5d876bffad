package gate

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// image is the lower layer most hostile cases share.
func image(t testing.TB, d string) {
	writeFile(t, d, "etc/passwd", "root:x:0:0::/root:/bin/sh\n", 0o644)
	writeFile(t, d, "ws/out/result.json", `{"from":"image"}`, 0o644)
	writeFile(t, d, "ws/out/set/x", "x", 0o644)
	writeFile(t, d, "ws/d/a", "a", 0o644)
	writeFile(t, d, "img.bin", "image bytes", 0o644)
}

// TestOverlayHostile: each case does something a hostile container could
// do through the merged view and must fail with a named rule, promptly,
// without reading past a cap or staging anything.
func TestOverlayHostile(t *testing.T) {
	tree := spec.Product{Class: spec.ClassDirectoryTree, Slot: "out/tree"}
	blob := spec.Product{Class: spec.ClassBlob, Slot: "out/blob"}
	cases := []struct {
		name    string
		prod    spec.Product
		act     func(t *testing.T, o *ovl)
		rule    string // product violation
		anomaly string // anomaly too, if any
	}{
		{"symlink_outside", tree, func(t *testing.T, o *ovl) {
			mkdirAll(t, o.merged, "ws/out/tree")
			must(t, os.Symlink("/etc/passwd", o.m("ws/out/tree/passwd")))
		}, RuleSymlink, ""},
		{"symlink_outside_allowed_is_recorded_not_followed", spec.Product{Class: spec.ClassBlob, Slot: "out/blob", AllowSymlinks: true}, func(t *testing.T, o *ovl) {
			mkdirAll(t, o.merged, "ws/out")
			must(t, os.Symlink("../../etc/passwd", o.m("ws/out/blob")))
		}, RuleSymlink, ""},
		{"symlink_at_slot", blob, func(t *testing.T, o *ovl) {
			mkdirAll(t, o.merged, "ws/out")
			must(t, os.Symlink("/img.bin", o.m("ws/out/blob")))
		}, RuleSymlink, ""},
		{"fifo_at_slot", blob, func(t *testing.T, o *ovl) {
			mkdirAll(t, o.merged, "ws/out")
			must(t, unix.Mkfifo(o.m("ws/out/blob"), 0o666))
		}, RuleSpecialFile, ""},
		{"char_device_at_slot", blob, func(t *testing.T, o *ovl) {
			mkdirAll(t, o.merged, "ws/out")
			must(t, unix.Mknod(o.m("ws/out/blob"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
		}, RuleSpecialFile, ""},
		{"block_device_in_tree", tree, func(t *testing.T, o *ovl) {
			writeFile(t, o.merged, "ws/out/tree/ok", "ok", 0o644)
			must(t, unix.Mknod(o.m("ws/out/tree/loop"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))))
		}, RuleSpecialFile, ""},
		{"socket_in_tree", tree, func(t *testing.T, o *ovl) {
			mkdirAll(t, o.merged, "ws/out/tree")
			bindSocket(t, o.m("ws/out/tree"), "sock")
		}, RuleSpecialFile, ""},
		{"hardlink_to_image_file", blob, func(t *testing.T, o *ovl) {
			mkdirAll(t, o.merged, "ws/out")
			must(t, os.Link(o.m("img.bin"), o.m("ws/out/blob")))
		}, RuleHardlink, ""},
		{"sparse_10GiB", spec.Product{Class: spec.ClassBlob, Slot: "out/blob", MaxBytes: 1 << 20}, func(t *testing.T, o *ovl) {
			p := writeFile(t, o.merged, "ws/out/blob", "", 0o644)
			must(t, os.Truncate(p, 10<<30))
		}, RuleOverMaxBytes, ""},
		{"depth_10000", tree, func(t *testing.T, o *ovl) {
			mkdirAll(t, o.merged, "ws/out/tree")
			nest(t, o.m("ws/out/tree"), 10000)
		}, RuleOverMaxDepth, ""},
		{"name_dots", tree, func(t *testing.T, o *ovl) { writeFile(t, o.merged, "ws/out/tree/...", "x", 0o644) }, RuleBadName, ""},
		{"name_dotdot_newline", tree, func(t *testing.T, o *ovl) { writeFile(t, o.merged, "ws/out/tree/..\n", "x", 0o644) }, RuleBadName, ""},
		{"name_newline", tree, func(t *testing.T, o *ovl) { writeFile(t, o.merged, "ws/out/tree/a\nb", "x", 0o644) }, RuleBadName, ""},
		{"name_invalid_utf8", tree, func(t *testing.T, o *ovl) { writeFile(t, o.merged, "ws/out/tree/\xc3\x28", "x", 0o644) }, RuleBadName, ""},
		{"name_whiteout_prefix", tree, func(t *testing.T, o *ovl) { writeFile(t, o.merged, "ws/out/tree/.wh.a", "x", 0o644) }, RuleBadName, ""},
		{"forged_user_opaque", spec.Product{Class: spec.ClassDirectoryTree, Slot: "d"}, func(t *testing.T, o *ovl) {
			writeFile(t, o.merged, "ws/d/b", "b", 0o644)
			must(t, unix.Setxattr(o.m("ws/d"), "user.overlay.opaque", []byte("y"), 0))
		}, RuleForgedOpaque, RuleForgedOpaque},
		{"image_slot_untouched", spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"}, func(*testing.T, *ovl) {}, RulePartial, ""},
		{"image_slot_copied_up_only", spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"}, func(t *testing.T, o *ovl) {
			must(t, os.Chmod(o.m("ws/out/result.json"), 0o640))
		}, RulePartial, ""},
		{"image_dir_slot_delta", spec.Product{Class: spec.ClassBlobSet, Slot: "out/set"}, func(t *testing.T, o *ovl) {
			writeFile(t, o.merged, "ws/out/set/y", "y", 0o644)
		}, RulePartial, ""},
		{"slot_deleted", spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"}, func(t *testing.T, o *ovl) {
			must(t, os.Remove(o.m("ws/out/result.json")))
		}, RuleMissing, ""},
		{"patch_with_fifo", spec.Product{Class: spec.ClassWorkspacePatch, Slot: "p"}, func(t *testing.T, o *ovl) {
			must(t, unix.Mkfifo(o.m("ws/pipe"), 0o600))
		}, RuleSpecialFile, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := mountOverlay(t, hardened, image)
			in := o.input(t, c.prod)
			c.act(t, o)
			t0 := time.Now()
			res := runGate(t, in)
			if d := time.Since(t0); d > 10*time.Second {
				t.Errorf("gate took %v", d)
			}
			requireRule(t, res, c.prod.Slot, c.rule)
			if c.anomaly != "" && !hasAnomaly(res, c.anomaly) {
				t.Errorf("no %s anomaly: %+v", c.anomaly, res.Anomalies)
			}
			stagedEmpty(t, in.StagingDir)
		})
	}
}

func TestOverlaySetuidStaysOutOfStaging(t *testing.T) {
	o := mountOverlay(t, hardened, image)
	in := o.input(t, spec.Product{Class: spec.ClassBlob, Slot: "out/tool"})
	p := writeFile(t, o.merged, "ws/out/tool", "#!/bin/sh\n", 0o755)
	must(t, unix.Chmod(p, 0o6755))
	res := runGate(t, in)
	pr := requirePass(t, res, "out/tool")
	var st unix.Stat_t
	must(t, unix.Lstat(pr.Staged, &st))
	if st.Mode&0o7000 != 0 || pr.Entries[0].Mode != "6755" {
		t.Fatalf("staged mode %o (recorded %s): setuid/setgid must be stripped and recorded", st.Mode&0o7777, pr.Entries[0].Mode)
	}
}

// TestOverlayUnhardenedMarkers mounts without the hardening to make the
// kernel write metacopy and redirect xattrs, which the gate must refuse.
func TestOverlayUnhardenedMarkers(t *testing.T) {
	o := mountOverlay(t, "metacopy=on,redirect_dir=on", image)
	in := o.input(t, spec.Product{Class: spec.ClassBlob, Slot: "out/result.json"}, spec.Product{Class: spec.ClassWorkspacePatch, Slot: "p"})
	must(t, os.Chmod(o.m("ws/out/result.json"), 0o600)) // metadata-only copy-up
	must(t, os.Rename(o.m("ws/d"), o.m("ws/d2")))       // redirect
	res := runGate(t, in)
	for _, rule := range []string{RuleMetacopy, RuleRedirect} {
		if !hasAnomaly(res, rule) {
			t.Errorf("no %s anomaly: %+v", rule, res.Anomalies)
		}
	}
	requireRule(t, res, "out/result.json", RuleMetacopy)
	requireRule(t, res, "p", RuleRedirect)
	stagedEmpty(t, in.StagingDir)
}

func TestOverlayMountStubs(t *testing.T) {
	o := mountOverlay(t, hardened, image)
	in := o.input(t, spec.Product{Class: spec.ClassBlob, Slot: "out/blob"})
	in.ExcludeMounts = []string{"/run", "/etc/resolv.conf", "/dev", "/ws/cache"}
	mkdirAll(t, o.merged, "run")
	mkdirAll(t, o.merged, "dev")
	writeFile(t, o.merged, "etc/resolv.conf", "", 0o644)
	writeFile(t, o.merged, "ws/cache/big", "cached", 0o644)
	writeFile(t, o.merged, "ws/out/blob", "b", 0o644)
	res := runGate(t, in)
	requirePass(t, res, "out/blob")
	if res.Unclaimed.Count != 0 || res.Excluded.MountStubs != 4 {
		t.Fatalf("unclaimed %+v excluded %+v", res.Unclaimed, res.Excluded)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// bindSocket creates a unix socket named name in dir; the bind goes through
// /proc/self/fd so long test paths fit in sun_path.
func bindSocket(t *testing.T, dir, name string) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(dfd)
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(s)
	must(t, unix.Bind(s, &unix.SockaddrUnix{Name: fmt.Sprintf("/proc/self/fd/%d/%s", dfd, name)}))
}

// nest creates dir/d/d/... depth levels deep with mkdirat/openat (the path
// would be far past PATH_MAX), and registers a cleanup that flattens it
// again (one level at a time, constant fds) before the overlay goes away.
func nest(t *testing.T, dir string, depth int) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	for i := 0; i < depth; i++ {
		must(t, unix.Mkdirat(fd, "d", 0o755))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
	}
	unix.Close(fd)
	t.Cleanup(func() { flatten(t, dir) })
}

// flatten removes a dir/d/d/... chain: move d/d up beside d, remove the
// now empty d, rename the moved one to d; repeat.
func flatten(t *testing.T, dir string) {
	rfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Errorf("flatten %s: %v", dir, err)
		return
	}
	defer unix.Close(rfd)
	for {
		dfd, err := unix.Openat(rfd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			return
		}
		if err != nil {
			t.Errorf("flatten: %v", err)
			return
		}
		err = unix.Renameat(dfd, "d", rfd, "up")
		unix.Close(dfd)
		if err != nil && err != unix.ENOENT {
			t.Errorf("flatten: %v", err)
			return
		}
		if e := unix.Unlinkat(rfd, "d", unix.AT_REMOVEDIR); e != nil {
			t.Errorf("flatten: %v", e)
			return
		}
		if err == unix.ENOENT {
			return
		}
		if e := unix.Renameat(rfd, "up", rfd, "d"); e != nil {
			t.Errorf("flatten: %v", e)
			return
		}
	}
}
