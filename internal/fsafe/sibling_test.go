package fsafe

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// trustedTree is a directory (mode 0755) holding a copy of /bin/sh named
// name (mode 0755), both of the test's uid, under t.TempDir.
func trustedTree(t *testing.T, name string) (dir, prog string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	prog = filepath.Join(dir, name)
	if err := os.WriteFile(prog, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, prog
}

// TestOpenTrusted checks the file's and every directory's rules, each
// refusal an *UntrustedError naming the culprit, and that the last
// component is never followed.
func TestOpenTrusted(t *testing.T) {
	uid := uint32(os.Getuid())
	dir, prog := trustedTree(t, "gensee-test")
	for _, d := range []string{filepath.Dir(dir), filepath.Dir(filepath.Dir(dir))} {
		var st unix.Stat_t
		if unix.Stat(d, &st) != nil || st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 || st.Uid != 0 && st.Uid != uid {
			t.Skipf("the temp dir %s is not itself trusted", d)
		}
	}
	f, err := OpenTrusted(prog, uid)
	if err != nil {
		t.Fatalf("a trusted program: %v", err)
	}
	if fl, _ := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 || f.Name() != prog {
		t.Errorf("opened %q, close-on-exec %v", f.Name(), fl&unix.FD_CLOEXEC != 0)
	}
	f.Close()

	refused := func(what, culprit string) {
		t.Helper()
		f, err := OpenTrusted(prog, uid)
		var ue *UntrustedError
		if !errors.As(err, &ue) || ue.Path != culprit {
			t.Errorf("%s: %v, want an UntrustedError naming %s", what, err, culprit)
		}
		if f != nil {
			f.Close()
		}
	}
	chmod := func(p string, m os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	chmod(prog, 0o775)
	refused("a group-writable program", prog)
	chmod(prog, 0o644)
	refused("a program nobody may execute", prog)
	chmod(prog, 0o755)
	if _, err := OpenTrusted(prog, uid+1); err == nil {
		t.Error("a program of another uid than the owner's was trusted")
	}
	chmod(dir, 0o777)
	refused("a world-writable directory", dir)
	chmod(dir, os.ModeSticky|0o777)
	if f, err := OpenTrusted(prog, uid); err != nil {
		t.Errorf("a sticky directory: %v", err)
	} else {
		f.Close()
	}
	chmod(dir, 0o755)
	parent := filepath.Dir(dir)
	chmod(parent, 0o770)
	refused("a group-writable directory above", parent)
	chmod(parent, 0o700)
	if os.Getuid() == 0 {
		if err := os.Chown(dir, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		refused("a directory of another uid", dir)
		os.Chown(dir, 0, 0)
	}

	link := filepath.Join(dir, "link")
	if err := os.Symlink(prog, link); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenTrusted(link, uid); !errors.Is(err, unix.ELOOP) {
		t.Errorf("a symlink: %v, want ELOOP", err)
		if f != nil {
			f.Close()
		}
	}
	if _, err := OpenTrusted(filepath.Join(dir, "missing"), uid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing program: %v, want fs.ErrNotExist", err)
	}
}

// TestExecLink checks that a child started through the link runs the
// file that was opened and checked, even when another program has taken
// its path since, with the caller's argv[0] and the program's own name as
// its comm; and that the link leaves nothing behind.
func TestExecLink(t *testing.T) {
	_, prog := trustedTree(t, "gensee-test")
	f, err := os.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Another program takes the path after the check.
	if err := os.Rename(prog, prog+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho swapped\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path, remove := ExecLink(f, filepath.Base(prog))
	cmd := &exec.Cmd{Path: path, Args: []string{prog, "-c", `echo "$0 $(cat /proc/$$/comm)"`}}
	out, err := cmd.Output()
	remove()
	if err != nil {
		t.Fatalf("run through the link: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), prog+" gensee-test"; got != want {
		t.Errorf("the child said %q, want %q (argv[0], comm)", got, want)
	}
	if _, err := os.Lstat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link's directory is left: %v", err)
	}

	// No temp dir to make the link in: /proc/self/fd/N, the same file.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	path, remove = ExecLink(f, filepath.Base(prog))
	defer remove()
	if path != "/proc/self/fd/"+strconv.Itoa(int(f.Fd())) {
		t.Errorf("without a temp dir: %s", path)
	}
	out, err = (&exec.Cmd{Path: path, Args: []string{prog, "-c", "echo ran"}}).Output()
	if err != nil || strings.TrimSpace(string(out)) != "ran" {
		t.Errorf("run through /proc/self/fd: %q, %v", out, err)
	}
}
