package fsafe

import (
	"errors"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrDotDot refuses a "..", "." or empty component: Walker never steps out
// of, or stays on, the directory it was given.
var ErrDotDot = errors.New(`path component is "..", "." or empty`)

// Walker opens a relative path one component at a time, each with
// openat(2)(Flags|O_NOFOLLOW|O_CLOEXEC) relative to the fd of the one
// before, so no symlink anywhere in the path is followed and each
// directory can be checked on the fd that the next lookup uses (nothing
// can be swapped between check and use). It is for where openat2 does not
// apply: a kernel before 5.6, or a walk that must judge every directory on
// the way (owner and mode of a trust anchor's parents).
type Walker struct {
	// Flags are the open flags of every component besides O_NOFOLLOW and
	// O_CLOEXEC: O_PATH opens a symlink component as itself (for Check to
	// name it), O_RDONLY|O_DIRECTORY fails on one (ELOOP or ENOTDIR).
	Flags int
	// Mkdir, when nonzero, creates each component (mode Mkdir, less the
	// umask) before opening it; one that exists already is fine.
	Mkdir uint32
	// Check, when set, judges each opened component on its fd; rel is the
	// path walked so far. An error stops the walk and is returned as is.
	Check func(fd int, rel string) error
}

// Open walks rel ('/'-separated, relative; "" or "." for dirfd itself)
// below dirfd, which stays open, and returns an fd of its last component
// (a dup of dirfd for an empty rel), for the caller to close. A failed
// open or mkdir is an *os.PathError naming the part of rel walked so far;
// a "..", "." or empty component in rel is refused with ErrDotDot.
func (w Walker) Open(dirfd int, rel string) (int, error) {
	fd, err := RetryEINTR(func() (int, error) { return unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 0) })
	if err != nil {
		return -1, &os.PathError{Op: "dup", Path: ".", Err: err}
	}
	if rel == "" || rel == "." {
		return fd, nil
	}
	walked := ""
	for _, c := range strings.Split(rel, "/") {
		walked = path.Join(walked, c)
		if c == "" || c == "." || c == ".." {
			unix.Close(fd)
			return -1, &os.PathError{Op: "walk", Path: walked, Err: ErrDotDot}
		}
		if w.Mkdir != 0 {
			if err := unix.Mkdirat(fd, c, w.Mkdir); err != nil && err != unix.EEXIST {
				unix.Close(fd)
				return -1, &os.PathError{Op: "mkdirat", Path: walked, Err: err}
			}
		}
		next, err := RetryEINTR(func() (int, error) {
			return unix.Openat(fd, c, w.Flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		unix.Close(fd)
		if err != nil {
			return -1, &os.PathError{Op: "openat", Path: walked, Err: err}
		}
		fd = next
		if w.Check != nil {
			if err := w.Check(fd, walked); err != nil {
				unix.Close(fd)
				return -1, err
			}
		}
	}
	return fd, nil
}

// OpenDirAt opens the directory name (one component) below dirfd without
// following a symlink at it.
func OpenDirAt(dirfd int, name string) (int, error) {
	fd, err := openDir(dirfd, name)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return fd, nil
}
