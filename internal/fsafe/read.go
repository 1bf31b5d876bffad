package fsafe

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ReadFlags open a file for a safe read: no symlink followed at the last
// component (ELOOP), no wait on a fifo, no controlling tty, no leak into a
// child. O_NONBLOCK changes nothing for the regular files that are read.
const ReadFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC

// ErrNotRegular and ErrTooLarge match (errors.Is) every *NotRegularError
// and *TooLargeError.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// NotRegularError is a read refused because the object is not a regular
// file (by fstat of the opened fd).
type NotRegularError struct {
	Path string
	Mode uint32 // st_mode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (%s)", e.Path, Kind(e.Mode))
}

// Is matches ErrNotRegular.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// TooLargeError is a read refused because the file holds more than Limit
// bytes: by fstat before reading (Size), or found while reading (Grew).
type TooLargeError struct {
	Path  string
	Size  int64 // st_size when refused before reading; Limit+1 when Grew
	Limit int64
	Grew  bool
}

func (e *TooLargeError) Error() string {
	if e.Grew {
		return fmt.Sprintf("%s grew past %d bytes while read", e.Path, e.Limit)
	}
	return fmt.Sprintf("%s is %d bytes, more than %d", e.Path, e.Size, e.Limit)
}

// Is matches ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Kind names the file type in a st_mode for messages: "regular file",
// "directory", "symlink", "fifo", "socket", "char device", "block device".
func Kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "char device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "unknown file type"
}

// OpenFileAt opens name below dirfd (unix.AT_FDCWD: name is a path) with
// ReadFlags and fstats the fd. It returns the file and its stat only for a
// regular file: a symlink at the last component fails with ELOOP inside an
// *os.PathError (errors.Is(err, unix.ELOOP)), anything else that is not a
// regular file with *NotRegularError. Nothing is read.
func OpenFileAt(dirfd int, name string) (*os.File, *unix.Stat_t, error) {
	return openRegular(dirfd, name, ReadFlags)
}

// OpenFile is OpenFileAt for a path.
func OpenFile(path string) (*os.File, *unix.Stat_t, error) {
	return OpenFileAt(unix.AT_FDCWD, path)
}

// OpenFileFollow is OpenFile that follows a symlink at the last component:
// only for a path a person names on a command line, where a symlink is
// their own choice. Everything else (a regular file only, no fifo wait, no
// tty) holds.
func OpenFileFollow(path string) (*os.File, *unix.Stat_t, error) {
	return openRegular(unix.AT_FDCWD, path, ReadFlags&^unix.O_NOFOLLOW)
}

func openRegular(dirfd int, name string, flags int) (*os.File, *unix.Stat_t, error) {
	fd, err := RetryEINTR(func() (int, error) { return unix.Openat(dirfd, name, flags, 0) })
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, nil, &NotRegularError{Path: name, Mode: st.Mode}
	}
	return os.NewFile(uintptr(fd), name), &st, nil
}

// ReadAll reads f, whose fstat is st, from its current offset: at most
// limit bytes. A file whose st_size is above limit is refused before a
// byte is read; one that grows past limit while read is refused after
// limit+1 bytes. Both are *TooLargeError naming f.Name().
func ReadAll(f *os.File, st *unix.Stat_t, limit int64) ([]byte, error) {
	if st.Size > limit {
		return nil, &TooLargeError{Path: f.Name(), Size: st.Size, Limit: limit}
	}
	data, err := readSized(io.LimitReader(f, limit+1), st.Size)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: f.Name(), Size: int64(len(data)), Limit: limit, Grew: true}
	}
	return data, nil
}

// ReadFileAt reads the regular file name below dirfd, at most limit bytes,
// never following a symlink at name's last component (OpenFileAt, ReadAll).
func ReadFileAt(dirfd int, name string, limit int64) ([]byte, error) {
	f, st, err := OpenFileAt(dirfd, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, st, limit)
}

// ReadFile is ReadFileAt for a path.
func ReadFile(path string, limit int64) ([]byte, error) {
	return ReadFileAt(unix.AT_FDCWD, path, limit)
}

// readSized is io.ReadAll with its buffer sized from the file's fstat size
// (one byte more, to see a file that grew): one allocation and two reads
// for a file that did not change, where io.ReadAll grows from 512 bytes
// (a 150 KiB catalog: a dozen allocations and copies on every Create). A
// size of 0 (procfs) reads as io.ReadAll does.
func readSized(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, max(size+1, 512))
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // room to read on
		}
	}
}
