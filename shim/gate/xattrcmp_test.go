package gate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/walk"
	"golang.org/x/sys/unix"
)

func TestEqualXattrs(t *testing.T) {
	x := func(kv ...string) []walk.Xattr {
		var out []walk.Xattr
		for i := 0; i < len(kv); i += 2 {
			out = append(out, walk.Xattr{Name: kv[i], Value: []byte(kv[i+1])})
		}
		return out
	}
	cases := []struct {
		name string
		a, b []walk.Xattr
		same bool
	}{
		{"both_empty", nil, x(), true},
		{"equal", x("user.a", "1", "security.capability", "\x01\x00"), x("user.a", "1", "security.capability", "\x01\x00"), true},
		{"order", x("user.a", "1", "user.b", "2"), x("user.b", "2", "user.a", "1"), true},
		{"empty_value", x("user.a", ""), x("user.a", ""), true},
		{"added", x("security.capability", "\x01"), nil, false},
		{"removed", nil, x("security.capability", "\x01"), false},
		{"value", x("user.a", "1"), x("user.a", "2"), false},
		{"value_prefix", x("user.a", "1"), x("user.a", "12"), false},
		{"renamed", x("user.a", "1"), x("user.b", "1"), false},
		{"duplicate_name", x("user.a", "1", "user.a", "1"), x("user.a", "1", "user.b", "1"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := equalXattrs(c.a, c.b); got != c.same {
				t.Fatalf("equalXattrs = %v, want %v", got, c.same)
			}
			if got := equalXattrs(c.b, c.a); got != c.same {
				t.Fatalf("equalXattrs (swapped) = %v, want %v", got, c.same)
			}
		})
	}
}

func TestXattrFailed(t *testing.T) {
	cases := []struct {
		err  error
		same bool
		rule string
	}{
		{fmt.Errorf("xattrs of %q: %w", "lnk", walk.ErrNoXattrAt), true, ""},
		{fmt.Errorf("xattrs of %q: %w", "f", walk.ErrXattrCap), false, RuleOverMaxBytes},
		{fmt.Errorf("xattrs of %q: %w", "f", walk.ErrChanged), false, RuleChanged},
		{errors.New("EIO"), false, RuleUnreadable},
	}
	for _, c := range cases {
		same, bad := xattrFailed(c.err)
		switch {
		case same != c.same:
			t.Errorf("%v: same %v, want %v", c.err, same, c.same)
		case c.rule == "" && bad != nil:
			t.Errorf("%v: violation %+v, want none", c.err, bad)
		case c.rule != "" && (bad == nil || bad.Rule != c.rule || !strings.Contains(bad.Detail, "extended attributes")):
			t.Errorf("%v: violation %+v, want rule %s", c.err, bad, c.rule)
		}
	}
}

// TestCopyUpComparedByXattrs: on the plain-directory overlay layout, a
// same-metadata, same-bytes copy whose user.* xattrs differ from the
// image's (added, changed, removed; on a file or a directory) counts as a
// modify; equal xattrs do not.
func TestCopyUpComparedByXattrs(t *testing.T) {
	f := newFakeOverlay(t)
	set := func(dir, rel, name, value string) {
		t.Helper()
		err := unix.Setxattr(filepath.Join(dir, rel), name, []byte(value), 0)
		if err == unix.ENOTSUP || err == unix.EPERM {
			t.Skipf("user xattrs not supported here: %v", err)
		}
		must(t, err)
	}
	for _, rel := range []string{"etc/same", "etc/added", "etc/changed", "etc/removed", "etc/plain"} {
		f.both(t, rel, "bytes", "bytes")
	}
	set(f.lower, "etc/same", "user.a", "1")
	set(f.upper, "etc/same", "user.a", "1")
	set(f.upper, "etc/added", "user.test", "1")
	set(f.lower, "etc/changed", "user.a", "1")
	set(f.upper, "etc/changed", "user.a", "2")
	set(f.lower, "etc/removed", "user.a", "1")
	mkdirAll(t, f.lower, "dir/keep")
	mkdirAll(t, f.upper, "dir")
	set(f.upper, "dir", "user.test", "1")
	must(t, os.Chmod(filepath.Join(f.upper, "ws"), 0o755))
	res := runGate(t, f.input(t))
	want := []string{"/dir", "/etc/added", "/etc/changed", "/etc/removed"}
	if res.Verdict != Pass || res.Unclaimed.Count != int64(len(want)) || strings.Join(res.Unclaimed.Sample, ",") != strings.Join(want, ",") {
		t.Fatalf("verdict %s unclaimed %+v anomalies %+v; want %v counted as modified", res.Verdict, res.Unclaimed, res.Anomalies, want)
	}
	if got := unclaimedDigest(want...); res.Unclaimed.Digest != got {
		t.Fatalf("digest %s, want %s (ordinary modify lines)", res.Unclaimed.Digest, got)
	}
}
