package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckStdio: FIFOs and empty are admitted, a binary logger only when
// allowlisted; file://, regular files, symlinks, relative paths and other
// schemes are refused with stdio_uri.
func TestCheckStdio(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "out")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	allow := []string{"/usr/local/bin/logger"}
	for _, tc := range []struct {
		uri string
		ok  bool
	}{
		{"", true},
		{fifo, true},
		{"binary:///usr/local/bin/logger?x=1", true},
		{"binary-v2:///usr/local/bin/logger", true},
		{"binary:///usr/bin/touch?/tmp/pwned", false},
		{"binary://host/usr/local/bin/logger", false},
		{"binary:usr/local/bin/logger", false},
		{"file://" + file, false},
		{"file:///etc/cron.d/x", false},
		{file, false},
		{link, false},
		{filepath.Join(dir, "missing"), false},
		{"out", false},
		{dir + "/../" + filepath.Base(dir) + "/out", false},
		{"fifo://" + fifo, false},
		{"http://example/x", false},
	} {
		in, out, errp := "", tc.uri, ""
		h, rf := holdStdio("task", &in, &out, &errp, allow)
		h.release()
		if tc.ok != (rf == nil) {
			t.Errorf("%q: %v, want admitted %v", tc.uri, rf, tc.ok)
			continue
		}
		if rf != nil && (rf.Reason != "stdio_uri" || rf.Field != "stdout" || !strings.Contains(rf.Message, "stdout")) {
			t.Errorf("%q: %v, want a stdio_uri refusal naming stdout", tc.uri, rf)
		}
	}
	in, out, errp := "file:///etc/shadow", "", ""
	if _, rf := holdStdio("exec", &in, &out, &errp, nil); rf == nil || !strings.Contains(rf.Error(), "exec's stdin") {
		t.Errorf("exec stdin file://: %v", rf)
	}
}

// TestHoldStdioSwap: the FIFO admitted is the FIFO the inner service
// opens. Once held, the client's path swapped for a symlink to a host
// file changes nothing: the request names the held FIFO, and State maps
// it back to the client's path.
func TestHoldStdioSwap(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "out")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, out, errp := "", fifo, ""
	h, err := holdStdio("task", &in, &out, &errp, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.release()
	if !strings.HasPrefix(out, "/proc/self/fd/") {
		t.Fatalf("the request names %q, not the held FIFO", out)
	}
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, fifo); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(out, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Fatalf("%s after the swap: mode %#o, %v; want the FIFO", out, st.Mode&unix.S_IFMT, err)
	}
	if got := h.client(out); got != fifo {
		t.Errorf("State would report %q, want the client's %q", got, fifo)
	}
	h.release()
	if err := unix.Stat(out, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		t.Error("the FIFO is still held after release")
	}
}
