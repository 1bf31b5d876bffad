package walk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCheckName(t *testing.T) {
	good := []string{"a", "a.b", ".hidden", "..a", "a..", "héllo", "名前", strings.Repeat("x", 255)}
	bad := []string{"", ".", "..", "...", "a/b", "a\nb", "a\x00b", "\xff", "a\u2028b", "tab\there", "del\x7f", strings.Repeat("x", 256)}
	for _, n := range good {
		if why := CheckName(n); why != "" {
			t.Errorf("CheckName(%q) = %q, want accepted", n, why)
		}
	}
	for _, n := range bad {
		if CheckName(n) == "" {
			t.Errorf("CheckName(%q) accepted", n)
		}
	}
}

func FuzzCheckName(f *testing.F) {
	f.Add("a")
	f.Add("..")
	f.Fuzz(func(t *testing.T, n string) {
		if CheckName(n) == "" && (strings.ContainsAny(n, "/\n\x00") || n == "." || n == "..") {
			t.Fatalf("accepted %q", n)
		}
	})
}

// TestWalkPlainDir checks order, kinds and that special files are reported
// from their stat alone (a FIFO open would block this test).
func TestWalkPlainDir(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"b", "a/c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("hi"), 0o644)
	os.WriteFile(filepath.Join(root, "a/c/f"), []byte("x"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(root, "b/link"))
	if err := unix.Mkfifo(filepath.Join(root, "b/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	var got []string
	done := make(chan error, 1)
	go func() {
		done <- tree.Walk(context.Background(), func(e *Entry) (bool, error) {
			if e.Err != nil {
				t.Errorf("%s: %v", e.Path, e.Err)
			}
			got = append(got, e.Path+":"+e.Kind.String())
			if e.Kind == KindFile {
				r, err := e.Reader()
				if err != nil {
					return false, err
				}
				b := make([]byte, 16)
				n, _ := r.Read(b)
				got[len(got)-1] += ":" + string(b[:n])
			}
			return true, nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("walk hung (a FIFO was opened?)")
	}
	want := "a:dir,a/c:dir,a/c/f:file:x,a.txt:file:hi,b:dir,b/fifo:fifo,b/link:symlink"
	if s := strings.Join(got, ","); s != want {
		t.Fatalf("walk = %s\nwant   %s", s, want)
	}
}

func TestWalkNameCap(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		os.WriteFile(filepath.Join(root, n), nil, 0o644)
	}
	tree, err := Open(root, Options{MaxNames: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	err = tree.Walk(context.Background(), func(*Entry) (bool, error) { return true, nil })
	if _, ok := err.(*LimitError); !ok {
		t.Fatalf("walk past the name cap: %v", err)
	}
}

func TestOpenRefusesSymlinkRoot(t *testing.T) {
	dir := t.TempDir()
	os.Symlink(dir, filepath.Join(dir, "link"))
	if _, err := Open(filepath.Join(dir, "link"), Options{}); err == nil {
		t.Fatal("Open followed a symlink root")
	}
}
