package asuser

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// nobody is an unprivileged account; the tests need no entry for it.
var nobody = Creds{UID: 65534, GID: 65534, Groups: []uint32{65534}}

// TestAsUserRoot: as root, files are opened exactly as the named user
// could: a root 0600 file is neither read nor replaced, a symlink is not
// followed, a fifo is never written, and every thread is root again after.
func TestAsUserRoot(t *testing.T) {
	if os.Getenv("GENSEE_ROOT_TESTS") != "1" {
		t.Skip("set GENSEE_ROOT_TESTS=1 (as root) to switch file-system credentials")
	}
	if os.Geteuid() != 0 {
		t.Fatal("GENSEE_ROOT_TESTS=1 but not root: this test sets fsuid and must be root")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody must reach it
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(nobody, secret, 100); !errors.Is(err, unix.EACCES) {
		t.Errorf("read root 0600 as nobody: %v, want EACCES", err)
	}
	if err := WriteFile(nobody, secret, []byte("{}"), 0o644); !errors.Is(err, unix.EACCES) {
		t.Errorf("write root 0600 as nobody: %v, want EACCES", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root only" {
		t.Errorf("secret changed: %q", b)
	}
	if err := WriteFile(nobody, filepath.Join(dir, "new"), []byte("{}"), 0o644); !errors.Is(err, unix.EACCES) {
		t.Errorf("create in root 0755 dir as nobody: %v, want EACCES", err)
	}
	// The same calls as root succeed: the same code path, other credentials.
	root := Creds{Groups: []uint32{0}}
	if b, err := ReadFile(root, secret, 100); err != nil || string(b) != "root only" {
		t.Errorf("read as root: %q, %v", b, err)
	}
	if _, err := ReadFile(root, secret, 3); !errors.Is(err, fsafe.ErrTooLarge) {
		t.Errorf("bounded read: %v", err)
	}

	// nobody's own directory: created files are nobody's, modes as asked.
	own := filepath.Join(dir, "own")
	if err := os.Mkdir(own, 0o700); err != nil || os.Chown(own, 65534, 65534) != nil {
		t.Fatal(err)
	}
	out := filepath.Join(own, "m.json")
	if err := WriteFile(nobody, out, []byte("{\"a\":1}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(out, &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
		t.Fatalf("created file: uid %d gid %d, %v", st.Uid, st.Gid, err)
	}
	if err := WriteFile(nobody, out, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "{}" {
		t.Errorf("rewritten in place: %q", b)
	}
	// A symlink to the secret is not followed, for reading or writing.
	link := filepath.Join(own, "link")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(root, link, 100); !errors.Is(err, unix.ELOOP) {
		t.Errorf("read through symlink: %v, want ELOOP", err)
	}
	if err := WriteFile(root, link, []byte("{}"), 0o644); !errors.Is(err, unix.ELOOP) {
		t.Errorf("write through symlink: %v, want ELOOP", err)
	}
	// A fifo is neither waited on nor written; a directory is refused.
	fifo := filepath.Join(own, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil || os.Chown(fifo, 65534, 65534) != nil {
		t.Fatal(err)
	}
	if err := WriteFile(nobody, fifo, []byte("{}"), 0o644); !errors.Is(err, unix.ENXIO) {
		t.Errorf("write to a fifo without reader: %v, want ENXIO", err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := WriteFile(nobody, fifo, []byte("{}"), 0o644); !errors.Is(err, fsafe.ErrNotRegular) {
		t.Errorf("write to a fifo with a reader: %v, want not regular", err)
	}
	if _, err := ReadFile(nobody, fifo, 100); !errors.Is(err, fsafe.ErrNotRegular) {
		t.Errorf("read a fifo: %v, want not regular", err)
	}
	if err := WriteFile(root, own, []byte("{}"), 0o644); err == nil {
		t.Error("wrote to a directory")
	}

	// Every thread of the process is root again: many goroutines on
	// locked threads read the secret.
	done := make(chan error, 32)
	for range cap(done) {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			uid, _ := unix.SetfsuidRetUid(-1)
			gid, _ := unix.SetfsgidRetGid(-1)
			groups, _ := unix.Getgroups()
			if uid != 0 || gid != 0 || len(groups) == 1 && groups[0] == 65534 {
				done <- errors.New("a thread kept the user's credentials")
				return
			}
			_, err := os.ReadFile(secret)
			done <- err
		}()
	}
	for range cap(done) {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestLookup(t *testing.T) {
	c := Lookup(4321, 4321, "")
	if c.UID != 4321 || c.GID != 4321 || len(c.Groups) != 1 || c.Groups[0] != 4321 {
		t.Fatalf("Lookup without a name = %+v", c)
	}
	c = Lookup(0, 0, "root")
	if len(c.Groups) == 0 || c.Groups[0] != 0 {
		t.Fatalf("Lookup root = %+v", c)
	}
}
