package fsafe

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// within fails t if fn does not return soon: a read that blocks on a fifo
// would hang the test otherwise.
func within(t *testing.T, fn func() error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("blocked")
		return nil
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "file"), "hello")
	write(t, filepath.Join(dir, "big"), strings.Repeat("x", 101))
	os.Symlink("file", filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	write(t, filepath.Join(dir, "sub", "f"), "inner")
	os.Symlink("sub", filepath.Join(dir, "sublink"))
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       string
		is         error
	}{
		{"regular", "file", "hello", nil},
		{"symlink leaf", "link", "", unix.ELOOP},
		{"fifo leaf never waited on", "fifo", "", ErrNotRegular},
		{"char device leaf", "/dev/null", "", ErrNotRegular},
		{"directory", "sub", "", ErrNotRegular},
		{"larger than the bound", "big", "", ErrTooLarge},
		{"missing", "none", "", unix.ENOENT},
		// O_NOFOLLOW guards the last component only; a symlinked parent
		// is the Walker's and openat2's job (below).
		{"symlink in a component resolves", "sublink/f", "inner", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			var got []byte
			err := within(t, func() (err error) { got, err = ReadFile(p, 100); return })
			if tc.is == nil {
				if err != nil || string(got) != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
		})
	}
}

func TestOpenFileFollow(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "file"), "x")
	os.Symlink("file", filepath.Join(dir, "link"))
	unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	os.Symlink("fifo", filepath.Join(dir, "fifolink"))
	f, _, err := OpenFileFollow(filepath.Join(dir, "link"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := within(t, func() error { _, _, err := OpenFileFollow(filepath.Join(dir, "fifolink")); return err }); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("fifo behind a symlink: %v", err)
	}
}

func TestReadErrorsNameTheRule(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "big"), strings.Repeat("x", 11))
	_, err := ReadFile(filepath.Join(dir, "big"), 10)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size != 11 || tl.Limit != 10 || tl.Grew || !strings.Contains(err.Error(), "is 11 bytes, more than 10") {
		t.Fatalf("err = %v", err)
	}
	_, err = ReadFile("/dev/null", 10)
	if err == nil || err.Error() != "/dev/null is not a regular file (char device)" {
		t.Fatalf("err = %v", err)
	}
}

// A file that grows between the fstat and the read is refused once more
// than the bound has been read, never returned truncated.
func TestReadAllFileGrowingWhileRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grow")
	write(t, p, "0123456789")
	f, st, err := OpenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString(strings.Repeat("y", 100))
	w.Close()
	_, err = ReadAll(f, st, 20)
	var tl *TooLargeError
	if !errors.As(err, &tl) || !tl.Grew || !strings.Contains(err.Error(), "grew past 20 bytes") {
		t.Fatalf("err = %v", err)
	}
}

func TestReadFileAtStaysOnTheDirFD(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "f"), "x")
	dfd, err := OpenDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if b, err := ReadFileAt(dfd, "f", 1); err != nil || string(b) != "x" {
		t.Fatalf("got %q, %v", b, err)
	}
	if _, err := OpenDirAt(unix.AT_FDCWD, filepath.Join(filepath.Dir(dir), "nope")); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryPolicy(t *testing.T) {
	calls := 0
	flaky := func(fails int, errno unix.Errno) func() (int, error) {
		calls = 0
		return func() (int, error) {
			if calls++; calls <= fails {
				return -1, errno
			}
			return 7, nil
		}
	}
	if v, err := retry(flaky(3, unix.EAGAIN), unix.EINTR, unix.EAGAIN); v != 7 || err != nil || calls != 4 {
		t.Fatalf("EAGAIN x3: %d, %v after %d calls", v, err, calls)
	}
	if v, err := RetryEINTR(flaky(MaxRetries-1, unix.EINTR)); v != 7 || err != nil {
		t.Fatalf("EINTR x%d: %d, %v", MaxRetries-1, v, err)
	}
	// Bounded: an errno that never stops is returned after MaxRetries.
	if _, err := RetryEINTR(flaky(1<<30, unix.EINTR)); err != unix.EINTR || calls != MaxRetries {
		t.Fatalf("endless EINTR: %v after %d calls", err, calls)
	}
	// EAGAIN is openat2's to retry; elsewhere (a LOCK_NB flock) it is an answer.
	if _, err := RetryEINTR(flaky(1, unix.EAGAIN)); err != unix.EAGAIN || calls != 1 {
		t.Fatalf("EAGAIN under RetryEINTR: %v after %d calls", err, calls)
	}
	// A wrapped errno counts too.
	wrapped := func() (int, error) { calls++; return 0, &os.PathError{Op: "x", Path: "y", Err: syscall.EINTR} }
	calls = 0
	RetryEINTR(wrapped)
	if calls != MaxRetries {
		t.Fatalf("wrapped EINTR retried %d times", calls)
	}
}

func TestOpenat2(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a/b"), 0o755)
	write(t, filepath.Join(root, "a/b/f"), "in")
	write(t, filepath.Join(filepath.Dir(root), "outside-"+filepath.Base(root)), "out")
	t.Cleanup(func() { os.Remove(filepath.Join(filepath.Dir(root), "outside-"+filepath.Base(root))) })
	os.Symlink("b", filepath.Join(root, "a/blink"))
	os.Symlink("/a/b/f", filepath.Join(root, "abs"))
	rfd, err := OpenDirAt(unix.AT_FDCWD, root)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	for _, tc := range []struct {
		name, path string
		resolve    uint64
		is         error // nil: opens
	}{
		{"confined plain", "a/b/f", ResolveConfined, nil},
		{"confined: symlink in a component", "a/blink/f", ResolveConfined, unix.ELOOP},
		{"confined: dot-dot escaping the root", "../outside-" + filepath.Base(root), ResolveConfined, unix.EXDEV},
		{"confined: dot-dot inside stays", "a/b/../b/f", ResolveConfined, nil},
		{"in root: absolute symlink resolves inside", "abs", ResolveInRoot, nil},
		{"in root: dot-dot clamps at the root", "../../a/b/f", ResolveInRoot, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := Openat2(rfd, tc.path, unix.O_RDONLY, tc.resolve)
			if tc.is == nil {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(os.NewFile(uintptr(fd), tc.path))
				if string(b) != "in" {
					t.Fatalf("read %q", b)
				}
				return
			}
			if err == nil {
				unix.Close(fd)
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
		})
	}
	// A /proc magic link is refused even where symlinks resolve.
	proc, err := OpenDirAt(unix.AT_FDCWD, "/proc/"+strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(proc)
	if fd, err := Openat2(proc, "root", unix.O_PATH, ResolveInRoot); !errors.Is(err, unix.ELOOP) {
		unix.Close(fd)
		t.Fatalf("magic link: err = %v", err)
	}
	r := os.NewFile(uintptr(rfd), root)
	f, err := OpenInRoot(r, "/a/blink/f", unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = OpenInRoot(r, "/none", unix.O_PATH)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "openat2 RESOLVE_IN_ROOT" || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("err = %v", err)
	}
}

func TestWriteFile(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "out")
	for _, d := range []Durability{Durable, NotDurable} {
		if err := WriteFile(p, strings.NewReader("v1"), 0o644, d); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(p); string(b) != "v1" {
		t.Fatalf("content %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v despite umask", fi.Mode())
	}
	// A symlink at the path is replaced, never followed.
	target := filepath.Join(dir, "target")
	write(t, target, "keep")
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if err := WriteFile(link, strings.NewReader("new"), 0o600, Durable); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("followed the symlink: target holds %q", b)
	}
	if fi, _ := os.Lstat(link); !fi.Mode().IsRegular() {
		t.Fatalf("link is %v", fi.Mode())
	}
	// A failing reader leaves the old file and no temp file.
	err := WriteFile(p, io.MultiReader(strings.NewReader("half"), errReader{}), 0o644, Durable)
	if err == nil || !strings.Contains(err.Error(), "write "+p) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "v1" {
		t.Fatalf("content %q after a failed write", b)
	}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if strings.Contains(n.Name(), ".tmp-") {
			t.Fatalf("temp file %s left", n.Name())
		}
	}
	dfd, _ := OpenDirAt(unix.AT_FDCWD, dir)
	defer unix.Close(dfd)
	if err := WriteFileAt(dfd, "at", bytes.NewReader([]byte("x")), 0o600, Durable); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "nodir", "f"), strings.NewReader(""), 0o600, Durable); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("err = %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestWalker(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a/b"), 0o755)
	os.Symlink("a", filepath.Join(root, "alink"))
	write(t, filepath.Join(root, "a/file"), "")
	rfd, _ := OpenDirAt(unix.AT_FDCWD, root)
	defer unix.Close(rfd)
	var seen []string
	w := Walker{Flags: unix.O_PATH, Check: func(fd int, rel string) error {
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		seen = append(seen, rel+":"+Kind(st.Mode))
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return errors.New(rel + " is a symlink")
		}
		return nil
	}}
	fd, err := w.Open(rfd, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if strings.Join(seen, ",") != "a:directory,a/b:directory" {
		t.Fatalf("checked %v", seen)
	}
	// O_PATH: a symlink component opens as itself, for Check to refuse.
	if _, err := w.Open(rfd, "alink/b"); err == nil || err.Error() != "alink is a symlink" {
		t.Fatalf("err = %v", err)
	}
	// O_DIRECTORY: a symlink or file component fails the open itself.
	d := Walker{Flags: unix.O_RDONLY | unix.O_DIRECTORY}
	for rel, want := range map[string]error{"alink/b": unix.ENOTDIR, "a/file/x": unix.ENOTDIR, "a/none": unix.ENOENT,
		"a/../..": ErrDotDot, "a//b": ErrDotDot, "./a": ErrDotDot} {
		if _, err := d.Open(rfd, rel); !errors.Is(err, want) {
			t.Errorf("%s: err = %v, want %v", rel, err, want)
		}
	}
	var pe *os.PathError
	if _, err := d.Open(rfd, "a/none/x"); !errors.As(err, &pe) || pe.Path != "a/none" {
		t.Fatalf("err = %v", err)
	}
	// Mkdir creates what is missing, keeps what exists.
	m := Walker{Flags: unix.O_RDONLY | unix.O_DIRECTORY, Mkdir: 0o700}
	fd, err = m.Open(rfd, "a/new/deeper")
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if fi, err := os.Stat(filepath.Join(root, "a/new/deeper")); err != nil || !fi.IsDir() {
		t.Fatalf("mkdir: %v", err)
	}
	if _, err := m.Open(rfd, "alink/x"); !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("mkdir through a symlink: %v", err)
	}
	// Empty: a dup of dirfd.
	fd, err = d.Open(rfd, "")
	if err != nil || fd == rfd {
		t.Fatalf("empty: %d, %v", fd, err)
	}
	unix.Close(fd)
}

func TestSyncTree(t *testing.T) {
	root := filepath.Join(t.TempDir(), "staged")
	os.MkdirAll(filepath.Join(root, "a/b"), 0o755)
	write(t, filepath.Join(root, "a/b/f"), "x")
	write(t, filepath.Join(root, "top"), "y")
	os.Symlink("/", filepath.Join(root, "a/escape")) // never followed
	os.Symlink("..", filepath.Join(root, "a/b/loop"))
	unix.Mkfifo(filepath.Join(root, "a/fifo"), 0o600) // never opened
	if err := within(t, func() error { return SyncTree(root) }); err != nil {
		t.Fatal(err)
	}
	if err := SyncTree(filepath.Join(root, "none")); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("err = %v", err)
	}
	if err := SyncDir(root); err != nil {
		t.Fatal(err)
	}
	if err := SyncFS(root); err != nil {
		t.Fatal(err)
	}
}

func TestReadNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		write(t, filepath.Join(dir, n), "")
	}
	fd, err := OpenDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	names, cut, err := ReadNames(fd, -1)
	if err != nil || cut || len(names) != 3 {
		t.Fatalf("%v %v %v", names, cut, err)
	}
	// From the start again, and cut at the budget.
	names, cut, err = ReadNames(fd, 2)
	if err != nil || !cut || len(names) != 2 {
		t.Fatalf("%v %v %v", names, cut, err)
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{
		{"/tmp", "/tmp", true}, {"/tmp/x", "/tmp", true}, {"/tmpx", "/tmp", false}, {"/", "/tmp", false},
		{"/etc", "/", true}, {"a/b", "a", true}, {"ab", "a", false}, {"a", "", true}, {"", "", true},
	} {
		if got := Within(tc.p, tc.dir); got != tc.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tc.p, tc.dir, got, tc.want)
		}
	}
}

// TestPrepare: a prepared file is not at its path until Commit; Abort
// leaves the path as it was; neither leaves a temp file.
func TestPrepare(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admission.json")
	p, err := Prepare(path, strings.NewReader("new"), 0o600, Durable)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("prepared file already at its path: %v", err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "new" {
		t.Fatalf("after Commit: %q %v", b, err)
	}
	p, err = Prepare(path, strings.NewReader("newer"), 0o600, Durable)
	if err != nil {
		t.Fatal(err)
	}
	p.Abort()
	if b, err := os.ReadFile(path); err != nil || string(b) != "new" {
		t.Fatalf("after Abort: %q %v", b, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("dir holds %v (%v), want the file alone", ents, err)
	}
}

// TestReadSized: the buffer sized from fstat reads a file whole, one that
// grew past its fstat size, and a procfs file whose size reads as 0.
func TestReadSized(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 5000)
	for _, size := range []int64{int64(len(data)), 10, 0, int64(len(data)) + 100} {
		got, err := readSized(bytes.NewReader(data), size)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: %d bytes, %v", size, len(got), err)
		}
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(f, &st, 1<<20)
	if err != nil || !bytes.Contains(got, []byte("VmRSS")) {
		t.Fatalf("procfs: %q %v", got, err)
	}
}
