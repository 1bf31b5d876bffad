package walk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestVisibleXattr(t *testing.T) {
	cases := []struct {
		name, ns string
		visible  bool
	}{
		{"security.capability", "trusted", true},
		{"user.test", "trusted", true},
		{"system.posix_acl_access", "trusted", true},
		{"trusted.overlay.origin", "trusted", false},
		{"trusted.overlay.opaque", "trusted", false},
		{"trusted.overlay.overlay.x", "trusted", true}, // escaped: set through the merged view
		{"user.overlay.opaque", "trusted", true},       // other namespace: an attribute (and a forged marker)
		{"trusted.overlayfoo", "trusted", true},
		{"user.overlay.origin", "user", false},
		{"user.overlay.overlay.x", "user", true},
		{"trusted.overlay.origin", "user", true},
	}
	for _, c := range cases {
		if got := visibleXattr(c.name, c.ns); got != c.visible {
			t.Errorf("visibleXattr(%q, %q) = %v, want %v", c.name, c.ns, got, c.visible)
		}
	}
}

// fakeXattrs serves a name list and values the way the kernel does:
// ERANGE when the buffer is short, the size when it is empty.
type fakeXattrs struct {
	names  []string
	values map[string]string
	err    error // returned by every call, when set
}

func (f *fakeXattrs) io() xattrIO {
	serve := func(s string, ok bool, buf []byte) (int, error) {
		switch {
		case f.err != nil:
			return 0, f.err
		case !ok:
			return 0, unix.ENODATA
		case len(buf) == 0:
			return len(s), nil
		case len(buf) < len(s):
			return 0, unix.ERANGE
		}
		return copy(buf, s), nil
	}
	return xattrIO{
		list: func(buf []byte) (int, error) {
			var b strings.Builder
			for _, n := range f.names {
				b.WriteString(n + "\x00")
			}
			return serve(b.String(), true, buf)
		},
		get: func(name string, buf []byte) (int, error) {
			v, ok := f.values[name]
			return serve(v, ok, buf)
		},
	}
}

func TestReadXattrs(t *testing.T) {
	big := strings.Repeat("v", MaxXattrValue)
	many := &fakeXattrs{values: map[string]string{}}
	for i := range MaxXattrBytes/MaxXattrValue + 1 {
		n := "user.v" + string(rune('a'+i))
		many.names = append(many.names, n)
		many.values[n] = big
	}
	cases := []struct {
		name string
		f    *fakeXattrs
		want string // names=values, sorted
		err  error
	}{
		{"none", &fakeXattrs{}, "", nil},
		{"sorted_filtered", &fakeXattrs{
			names:  []string{"user.b", "trusted.overlay.origin", "security.capability", "trusted.overlay.overlay.x", "user.a"},
			values: map[string]string{"user.b": "2", "security.capability": "cap", "trusted.overlay.overlay.x": "e", "user.a": strings.Repeat("1", 300)},
		}, "security.capability=cap,trusted.overlay.overlay.x=e,user.a=" + strings.Repeat("1", 300) + ",user.b=2", nil},
		{"value_at_cap", &fakeXattrs{names: []string{"user.a"}, values: map[string]string{"user.a": big}}, "user.a=" + big, nil},
		{"value_over_cap", &fakeXattrs{names: []string{"user.a"}, values: map[string]string{"user.a": big + "v"}}, "", ErrXattrCap},
		{"total_over_cap", many, "", ErrXattrCap},
		{"listed_then_gone", &fakeXattrs{names: []string{"user.a"}}, "", ErrChanged},
		{"no_xattr_support", &fakeXattrs{err: unix.ENOTSUP}, "", nil},
		{"no_xattrat", &fakeXattrs{err: unix.ENOSYS}, "", ErrNoXattrAt},
		{"list_too_big", &fakeXattrs{err: unix.E2BIG}, "", ErrXattrCap},
		{"io_error", &fakeXattrs{err: unix.EIO}, "", unix.EIO},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			xs, err := readXattrs(c.f.io(), "trusted")
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range xs {
				got = append(got, x.Name+"="+string(x.Value))
			}
			if strings.Join(got, ",") != c.want {
				t.Fatalf("got %q, want %q", strings.Join(got, ","), c.want)
			}
		})
	}
}

func TestReadXattrsOverListCap(t *testing.T) {
	f := &fakeXattrs{}
	for len(strings.Join(f.names, "\x00")) <= MaxXattrList {
		f.names = append(f.names, "user."+strings.Repeat("n", 200)+string(rune('a'+len(f.names)%26))+strings.Repeat("x", len(f.names)))
	}
	if _, err := readXattrs(f.io(), "trusted"); !errors.Is(err, ErrXattrCap) {
		t.Fatalf("err %v, want ErrXattrCap for a name list over %d bytes", err, MaxXattrList)
	}
}

// TestEntryXattrs reads the xattrs of both layers of a plain-directory
// overlay layout: a regular file and a directory through their fds, a
// symlink by name without following (its target's xattrs must not show).
func TestEntryXattrs(t *testing.T) {
	base := t.TempDir()
	upper, lower := filepath.Join(base, "u"), filepath.Join(base, "l")
	for _, d := range []string{upper + "/d", lower + "/d"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{upper + "/d/f", lower + "/d/f", lower + "/d/target"} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{upper + "/d/l", lower + "/d/l"} {
		if err := os.Symlink("target", p); err != nil {
			t.Fatal(err)
		}
	}
	set := func(p, name, value string) {
		t.Helper()
		if err := unix.Setxattr(p, name, []byte(value), 0); err != nil {
			t.Skipf("user xattrs not supported here: %v", err)
		}
	}
	set(upper+"/d/f", "user.b", "up")
	set(upper+"/d/f", "user.a", "up")
	set(lower+"/d/f", "user.a", "img")
	set(upper+"/d", "user.dir", "1")
	set(lower+"/d/target", "user.target", "1") // what a followed symlink would show
	tree, err := Open(upper, Options{Overlay: true, Lowers: []string{lower}})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	got := map[string]string{}
	str := func(xs []Xattr) string {
		var s []string
		for _, x := range xs {
			s = append(s, x.Name+"="+string(x.Value))
		}
		return strings.Join(s, ",")
	}
	err = tree.Walk(context.Background(), func(e *Entry) (bool, error) {
		up, err := e.Xattrs()
		if errors.Is(err, ErrNoXattrAt) && e.Kind == KindSymlink {
			t.Logf("%s: %v", e.Path, err)
			return true, nil
		}
		if err != nil {
			return false, err
		}
		img, err := e.ImageXattrs()
		if err != nil {
			return false, err
		}
		got[e.Path] = str(up) + " | " + str(img)
		if e.Kind == KindFile {
			f, err := e.OpenImage()
			if err != nil {
				return false, err
			}
			defer f.Close()
			viaFD, err := f.Xattrs()
			if err != nil || str(viaFD) != str(img) {
				t.Errorf("ImageFile.Xattrs %q (%v), ImageXattrs %q", str(viaFD), err, str(img))
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"d": "user.dir=1 | ", "d/f": "user.a=up,user.b=up | user.a=img"}
	if _, ok := got["d/l"]; ok {
		want["d/l"] = " | "
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: xattrs %q, want %q (upper | image)", p, got[p], w)
		}
	}
}
