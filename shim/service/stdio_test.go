package service

import (
	"errors"
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
		err := checkStdio("task", "", tc.uri, "", allow)
		if tc.ok != (err == nil) {
			t.Errorf("%q: %v, want admitted %v", tc.uri, err, tc.ok)
			continue
		}
		var re *refusedError
		if err != nil && (!errors.As(err, &re) || re.Reason != "stdio_uri" || !strings.Contains(re.Message, "stdout")) {
			t.Errorf("%q: %v, want a stdio_uri refusal naming stdout", tc.uri, err)
		}
	}
	if err := checkStdio("exec", "file:///etc/shadow", "", "", nil); err == nil || !strings.Contains(err.Error(), "exec's stdin") {
		t.Errorf("exec stdin file://: %v", err)
	}
}
