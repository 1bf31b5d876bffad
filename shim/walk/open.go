package walk

import (
	"errors"
	"fmt"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// ErrChanged reports that an entry changed between fstatat and open: the
// tree was not quiescent, or something raced the gate.
var ErrChanged = errors.New("entry changed during the walk")

// openat2 opens one component below dirfd confined like every lookup here
// (fsafe.ResolveConfined: no symlink anywhere, no magic links, no escape
// from the dirfd, no crossing into another mount), never blocking on the
// open, with fsafe's bounded retry of EINTR and of the EAGAIN openat2
// returns when a concurrent rename makes RESOLVE_BENEATH unsure.
func openat2(dirfd int, name string, flags uint64) (int, error) {
	return fsafe.Openat2(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK, fsafe.ResolveConfined)
}

// fstatat stats one component without following it.
func fstatat(dirfd int, name string, st *unix.Stat_t) error {
	_, err := fsafe.RetryEINTR(func() (struct{}, error) {
		return struct{}{}, unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
	})
	return err
}

// openChecked opens name below dirfd and verifies that the fd is the object
// want describes (same inode, device and file type). flags selects a
// directory (O_DIRECTORY) or a regular file.
func openChecked(dirfd int, name string, flags uint64, want *unix.Stat_t) (int, *unix.Stat_t, error) {
	fd, err := openat2(dirfd, name, flags)
	if err != nil {
		if err == unix.ELOOP || err == unix.ENOENT || err == unix.ENOTDIR || err == unix.EXDEV {
			return -1, nil, fmt.Errorf("open %q: %w (%w)", name, ErrChanged, err)
		}
		return -1, nil, fmt.Errorf("open %q: %w", name, err)
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("fstat %q: %w", name, err)
	}
	if got.Ino != want.Ino || got.Dev != want.Dev || got.Mode&unix.S_IFMT != want.Mode&unix.S_IFMT {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("open %q: %w (inode or type differs from fstatat)", name, ErrChanged)
	}
	return fd, &got, nil
}

// openRoot opens a runtime-supplied directory (upperdir, lowerdir, rootfs).
// The path itself is trusted configuration; its last component must still
// not be a symlink.
func openRoot(path string) (int, error) {
	fd, err := fsafe.OpenDirAt(unix.AT_FDCWD, path)
	if err != nil {
		return -1, fmt.Errorf("open root directory: %w", err)
	}
	return fd, nil
}
