package service

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The early bind runs once, on the pid runc renames into the bundle (as
// runc writes its pid file), and stop reports it; without the pid file it
// never runs and stop says so.
func TestEarlyBind(t *testing.T) {
	dir := t.TempDir()
	got := make(chan int, 2)
	e := watchInitPid(dir, func(pid int) error { got <- pid; return errors.New("bound") })
	if e == nil {
		t.Fatal("no inotify watch")
	}
	// Another file first, then the pid file as runc writes it: a dot
	// file renamed into place.
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "."+initPidFile)
	if err := os.WriteFile(tmp, []byte("4242"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, initPidFile)); err != nil {
		t.Fatal(err)
	}
	select {
	case pid := <-got:
		if pid != 4242 {
			t.Fatalf("bound pid %d, want 4242", pid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no early bind on the pid file")
	}
	if pid, err := e.stop(); pid != 4242 || err == nil || err.Error() != "bound" {
		t.Fatalf("stop = %d, %v; want the bind's pid and error", pid, err)
	}
	if len(got) != 0 {
		t.Fatal("bound twice")
	}

	dir = t.TempDir()
	e = watchInitPid(dir, func(int) error { t.Error("bound without a pid file"); return nil })
	if _, err := e.stop(); err != errNotEarly {
		t.Fatalf("stop without a pid file = %v, want errNotEarly", err)
	}
	// A pid file after stop starts nothing.
	os.WriteFile(filepath.Join(dir, initPidFile), []byte("1"), 0o600)
	time.Sleep(50 * time.Millisecond)
	var nilBind *earlyBind
	if _, err := nilBind.stop(); err != errNotEarly {
		t.Fatalf("stop of no watch = %v", err)
	}
}

// A pid file that holds no pid binds nothing.
func TestReadInitPid(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		body string
		ok   bool
	}{{"123\n", true}, {"", false}, {"-4", false}, {"0", false}, {"12a", false}} {
		p := filepath.Join(dir, "p")
		os.WriteFile(p, []byte(c.body), 0o600)
		pid, err := readInitPid(p)
		if (err == nil) != c.ok || (c.ok && pid != 123) {
			t.Errorf("%q: %d, %v", c.body, pid, err)
		}
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if _, err := readInitPid(filepath.Join(dir, "l")); err == nil {
		t.Error("a symlinked pid file was read")
	}
}
