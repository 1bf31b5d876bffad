package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// RefusalsPath is the refusals log of the state directory.
func (s Store) RefusalsPath() string { return filepath.Join(s.Dir, refusalsFile) }

// AppendRefusal appends one JSON line to the refusals log, which keeps
// admission refusals that never became an operation.
//
// Ordering with TrimRefusals: both hold an exclusive flock on the log. An
// append that waited while the log was rewritten finds its descriptor no
// longer names the file at the path and opens the new one, so no line is
// written into a log that was replaced.
func (s Store) AppendRefusal(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode refusal: %w", err)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	for range 8 {
		f, err := s.lockRefusals(os.O_WRONLY | os.O_APPEND | os.O_CREATE)
		if errors.Is(err, errReplaced) {
			continue
		}
		if err != nil {
			return err
		}
		// One write(2) of one line under O_APPEND: the shims of several
		// containers never interleave within a line.
		_, werr := f.Write(append(b, '\n'))
		if werr == nil {
			werr = f.Sync()
		}
		f.Close()
		if werr != nil {
			return fmt.Errorf("append refusal: %w", werr)
		}
		return nil
	}
	return errors.New("append refusal: the log kept being replaced")
}

var errReplaced = errors.New("file replaced while waiting for its lock")

// lockRefusals opens the log with flags and takes its exclusive lock; it
// returns errReplaced when the path names another file once locked.
func (s Store) lockRefusals(flags int) (*os.File, error) {
	return lockFile(s.RefusalsPath(), flags, "refusals log")
}

// lockFile opens the file at p (what names it in errors) with flags,
// never through a symlink, and takes its exclusive lock; it returns
// errReplaced when p names another file once locked (a writer replaced
// it meanwhile: the caller opens it again).
func lockFile(p string, flags int, what string) (*os.File, error) {
	f, err := os.OpenFile(p, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	var held, now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", what, err)
	}
	if held.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("open %s: %s is not a regular file", what, p)
	}
	if err := unix.Lstat(p, &now); err != nil || now.Ino != held.Ino || now.Dev != held.Dev {
		f.Close()
		return nil, errReplaced
	}
	return f, nil
}

// TrimRefusals rewrites the refusals log to keep only its bytes from the
// offset cut returns (cut reads the log from its start and must return
// the start of a line). The rewrite is atomic (temp file, fsync, rename)
// and holds the log's lock, so an append is never lost. It returns how
// many bytes were dropped; a missing log is no error.
func (s Store) TrimRefusals(cut func(r io.Reader) (int64, error)) (int64, error) {
	f, err := s.lockRefusals(os.O_RDONLY)
	for range 8 {
		if !errors.Is(err, errReplaced) {
			break
		}
		f, err = s.lockRefusals(os.O_RDONLY)
	}
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close() // releases the lock, after the rename
	off, err := cut(f)
	if err != nil {
		return 0, fmt.Errorf("read refusals log: %w", err)
	}
	if off <= 0 {
		return 0, nil
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("read refusals log: %w", err)
	}
	if err := fsafe.WriteFile(s.RefusalsPath(), f, 0o600, fsafe.Durable); err != nil {
		return 0, err
	}
	return off, nil
}
