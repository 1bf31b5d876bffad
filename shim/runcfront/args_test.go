package runcfront

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseCall: go-runc's command lines for a task (process.NewRunc:
// --root, --log, --log-format json) name the container for start and
// delete; any other flag, a command flag or a bad id leaves the call to
// the real runc.
func TestParseCall(t *testing.T) {
	base := []string{"--root", "/run/containerd/runc/demo", "--log", "/b/t1/log.json", "--log-format", "json"}
	cases := []struct {
		args          []string
		start, delete string
		bundle        string
	}{
		{append(slices.Clone(base), "start", "t1"), "t1", "", "/b/t1"},
		{append(slices.Clone(base), "delete", "t1"), "", "t1", "/b/t1"},
		{[]string{"--root=/r", "--log=/b/log.json", "--log-format=json", "start", "x"}, "x", "", "/b"},
		{append(slices.Clone(base), "delete", "--force", "t1"), "", "", "/b/t1"},
		{append(slices.Clone(base), "create", "--bundle", "/b/t1", "t1"), "", "", "/b/t1"},
		{append(slices.Clone(base), "start", "../x"), "", "", "/b/t1"},
		{append(slices.Clone(base), "start"), "", "", "/b/t1"},
		{append([]string{"--debug"}, append(slices.Clone(base), "start", "t1")...), "", "", ""},
		{append([]string{"--systemd-cgroup"}, append(slices.Clone(base), "delete", "t1")...), "", "", ""},
		{[]string{"--root", "/r", "--log", "/b/log.json", "--log-format", "text", "start", "t1"}, "", "", "/b"},
		{[]string{"--root", "relative", "--log", "/b/log.json", "start", "t1"}, "", "", "/b"},
		{[]string{"--log", "/b/other.log", "start", "t1"}, "", "", ""},
		{[]string{"--root"}, "", "", ""},
	}
	for _, c := range cases {
		call := parseCall(c.args)
		if got := call.container("start"); got != c.start {
			t.Errorf("%q: start container %q, want %q", c.args, got, c.start)
		}
		if got := call.container("delete"); got != c.delete {
			t.Errorf("%q: delete container %q, want %q", c.args, got, c.delete)
		}
		if got := call.bundle(); got != c.bundle {
			t.Errorf("%q: bundle %q, want %q", c.args, got, c.bundle)
		}
	}
}

func TestValidID(t *testing.T) {
	for _, id := range []string{"a", "t1", "A_b+c-d.e", strings.Repeat("x", 100)} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false", id)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "a b", "é", "a\x00"} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
}

// TestRealRunc: the real runc comes from the bundle's RuncFile only when
// that file is this process owner's, writable by nobody else, and names a
// clean absolute path.
func TestRealRunc(t *testing.T) {
	bundle := t.TempDir()
	if err := os.Chmod(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(bundle, RuncFile)
	write := func(s string, mode os.FileMode) {
		t.Helper()
		os.Remove(path)
		if err := os.WriteFile(path, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := realRunc(""); err == nil {
		t.Error("no bundle: want an error")
	}
	if _, err := realRunc(bundle); err == nil {
		t.Error("no file: want an error")
	}
	write("/usr/local/sbin/runc\n", 0o600)
	if got, err := realRunc(bundle); err != nil || got != "/usr/local/sbin/runc" {
		t.Errorf("realRunc = %q, %v", got, err)
	}
	write("/usr/local/sbin/runc\n", 0o622)
	if _, err := realRunc(bundle); err == nil {
		t.Error("a file others may write: want an error")
	}
	for _, bad := range []string{"runc\n", "/usr/../sbin/runc\n", "\n", "/a\n/b\n"} {
		write(bad, 0o600)
		if got, err := realRunc(bundle); err == nil {
			t.Errorf("%q: realRunc = %q, want an error", bad, got)
		}
	}
	os.Remove(path)
	if err := os.Symlink("/etc/hostname", path); err != nil {
		t.Fatal(err)
	}
	if _, err := realRunc(bundle); err == nil {
		t.Error("a symlink: want an error")
	}
}
