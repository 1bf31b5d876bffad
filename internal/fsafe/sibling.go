package fsafe

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// UntrustedError says why an executable the caller would run is not as
// trusted as the running binary: the file itself, or a directory above it
// that someone else could change.
type UntrustedError struct {
	Path   string // the file or the directory refused
	Reason string
}

func (e *UntrustedError) Error() string { return e.Path + " " + e.Reason }

// OpenTrustedSibling opens the executable name in the directory of the
// running binary (its symlinks resolved) when it is as trusted as that
// binary (OpenTrusted with the binary's owner). The file's Name is its
// path. A missing one is an error that matches fs.ErrNotExist.
func OpenTrustedSibling(name string) (*os.File, error) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	var own unix.Stat_t
	if err := unix.Stat(self, &own); err != nil {
		return nil, &os.PathError{Op: "stat", Path: self, Err: err}
	}
	return OpenTrusted(filepath.Join(filepath.Dir(self), name), own.Uid)
}

// OpenTrusted opens the executable at path (absolute, its last component
// not a symlink) once, O_RDONLY|O_NOFOLLOW|O_CLOEXEC, and returns it when
// it is trusted as a program of owner: by fstat of the opened file, a
// regular, executable file of owner that nobody else may write; and every
// directory from the file's own up to / is owned by root or owner and
// writable by nobody else, or sticky (/tmp: nobody may rename or remove
// what another user owns there). Whoever else could write one of them
// could put another program in its place. The caller runs what was
// checked through the returned file (ExecLink, Execveat), never by path
// again. An untrusted file or directory is an *UntrustedError.
func OpenTrusted(path string, owner uint32) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("open %s: not an absolute path", path)
	}
	fd, err := RetryEINTR(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 || st.Mode&0o022 != 0 || st.Uid != owner {
		f.Close()
		return nil, &UntrustedError{Path: path, Reason: "is not a regular executable of uid " + strconv.Itoa(int(owner)) + " that only its owner may write"}
	}
	if err := TrustedDirs(filepath.Dir(path), owner); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// TrustedDirs checks dir and every directory above it up to / (dir
// absolute, its symlinks resolved by the caller): each owned by root or
// owner, and writable by nobody else unless sticky. It stats by path: a
// directory that passes can be changed by root or owner only, so the ones
// above a passing one cannot be swapped by anyone else either.
func TrustedDirs(dir string, owner uint32) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return &os.PathError{Op: "stat", Path: d, Err: err}
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return &UntrustedError{Path: d, Reason: "is not a directory"}
		case st.Uid != 0 && st.Uid != owner:
			return &UntrustedError{Path: d, Reason: "is a directory of uid " + strconv.Itoa(int(st.Uid)) + ", neither root nor uid " + strconv.Itoa(int(owner))}
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			return &UntrustedError{Path: d, Reason: "is a directory that others than its owner may write"}
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// ExecLink is a path that runs f (OpenTrusted) from a child this process
// starts (os/exec: argv[0] stays the caller's): a symlink named base in a
// new private directory, to /proc/self/fd/<f>. The kernel resolves it in
// the child, which holds f until its exec succeeds, so what runs is the
// file that was checked, whatever its directory holds by then. It is a
// link and not /proc/self/fd/N itself because the kernel names the new
// process (its comm: ps, pgrep, top) after the path's last component:
// base, not N. A script cannot run this way from a close-on-exec f (its
// interpreter opens the path after the exec). Where no link can be made
// (no writable temp dir), the path is /proc/self/fd/N itself: the same
// file runs, named N. remove deletes the link and its directory; call it
// once the child has started.
func ExecLink(f *os.File, base string) (path string, remove func()) {
	fdPath := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	dir, err := os.MkdirTemp("", ".gensee-exec-")
	if err != nil {
		return fdPath, func() {}
	}
	path = filepath.Join(dir, base)
	if err := os.Symlink(fdPath, path); err != nil {
		os.Remove(dir)
		return fdPath, func() {}
	}
	return path, func() { os.Remove(path); os.Remove(dir) }
}
