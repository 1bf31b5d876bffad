package observe

import (
	"errors"
	"fmt"
	"os"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// openExecutable opens p inside root for reading only if it is a regular
// file with an exec bit. Lookups are fsafe.OpenInRoot's: absolute symlinks
// and ".." resolve against the rootfs root, no magic links. It looks with
// O_PATH first (opening a fifo or a device for reading could block or have
// side effects), then reopens for reading and checks that the same inode
// came back.
func openExecutable(root *os.File, p string) (executable, error) {
	pf, err := fsafe.OpenInRoot(root, p, unix.O_PATH)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENAMETOOLONG) {
			return executable{}, fmt.Errorf("%w: %w", ErrExecutableNotFound, err)
		}
		return executable{}, err
	}
	var want unix.Stat_t
	err = unix.Fstat(int(pf.Fd()), &want)
	pf.Close()
	if err != nil {
		return executable{}, fmt.Errorf("fstat %s: %w", p, err)
	}
	if want.Mode&unix.S_IFMT != unix.S_IFREG || want.Mode&0o111 == 0 {
		return executable{}, fmt.Errorf("%s is %s: %w", p, describe(want.Mode), ErrNotExecutable)
	}
	f, err := fsafe.OpenInRoot(root, p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return executable{}, err
	}
	var got unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &got); err != nil {
		f.Close()
		return executable{}, fmt.Errorf("fstat %s: %w", p, err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino || got.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return executable{}, fmt.Errorf("%s changed while it was being resolved; retry the create", p)
	}
	return executable{path: p, f: f, size: got.Size}, nil
}

// describe names a file type and mode for an error message.
func describe(mode uint32) string {
	kind := map[uint32]string{
		unix.S_IFDIR: "a directory", unix.S_IFIFO: "a fifo", unix.S_IFCHR: "a character device",
		unix.S_IFBLK: "a block device", unix.S_IFSOCK: "a socket", unix.S_IFLNK: "a symlink",
	}[mode&unix.S_IFMT]
	if kind == "" {
		return fmt.Sprintf("a regular file with mode %04o and no exec bit", mode&0o7777)
	}
	return kind + ", not a regular file"
}
