package trust

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// maxStateBytes caps the state file; it holds three short fields.
const maxStateBytes = 4096

// lockWait bounds how long Update waits for another shim holding the lock.
const lockWait = 5 * time.Second

// FileState is the StateStore for one JSON file (0600) in a directory the
// shim owns (created 0700, refused if another user owns it or group/other
// can write it). Writes are atomic: temp file in the same directory, fsync,
// rename, directory fsync. A lock file next to it (flock) serializes Update
// across shim processes.
type FileState struct {
	Path string
}

// NewFileState returns the store for the state file at path.
func NewFileState(path string) *FileState { return &FileState{Path: path} }

// Update implements StateStore.
func (s *FileState) Update(fn func(cur State, found bool) (State, bool, error)) error {
	return s.locked(true, func(dir *os.File, cur State, found bool) error {
		next, write, err := fn(cur, found)
		if err != nil || !write {
			return err
		}
		return s.write(dir, next)
	})
}

// locked calls fn with the state directory and the stored state, read
// under the store's lock. With create (Update), the directory and the
// lock file are made if missing and the lock is waited for up to
// lockWait; without (check), nothing is made and the lock is tried once.
func (s *FileState) locked(create bool, fn func(dir *os.File, cur State, found bool) error) error {
	open, flags, wait := s.openExistingDir, 0, time.Duration(0)
	if create {
		open, flags, wait = s.openDir, unix.O_CREAT, lockWait
	}
	dir, err := open()
	if err != nil {
		return err
	}
	defer dir.Close()
	unlock, err := s.lock(dir, flags, wait)
	if err != nil {
		return err
	}
	defer unlock()
	cur, found, err := s.read(dir)
	if err != nil {
		return err
	}
	return fn(dir, cur, found)
}

// openDir creates the state directory (0700) if needed and opens it
// (openExistingDir).
func (s *FileState) openDir() (*os.File, error) {
	dirPath := filepath.Dir(s.Path)
	if err := os.MkdirAll(dirPath, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", dirPath, err)
	}
	return s.openExistingDir()
}

// openExistingDir opens the state directory, refusing one owned by
// another user or writable by group/other: whoever can write there can
// replace the mark and re-open rollback.
func (s *FileState) openExistingDir() (*os.File, error) {
	dirPath := filepath.Dir(s.Path)
	dfd, err := fsafe.OpenDirAt(unix.AT_FDCWD, dirPath)
	if err != nil {
		return nil, fmt.Errorf("open state directory: %w", err)
	}
	d := os.NewFile(uintptr(dfd), dirPath)
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		d.Close()
		return nil, fmt.Errorf("stat state directory %s: %w", dirPath, err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		d.Close()
		return nil, fmt.Errorf("state directory %s is owned by uid %d with mode %04o; it must be owned by uid %d and not group/other-writable (run: chown %d %s && chmod 0700 %s)",
			dirPath, st.Uid, st.Mode&0o7777, os.Geteuid(), os.Geteuid(), dirPath, dirPath)
	}
	return d, nil
}

// check calls fn with the stored state, read under the store's lock if
// that lock is free now, creating nothing: a missing directory or lock
// file, or a lock another load holds, is an error at once (Current's
// caller then loads the catalog, and that load creates or waits).
func (s *FileState) check(fn func(cur State, found bool) error) error {
	return s.locked(false, func(_ *os.File, cur State, found bool) error { return fn(cur, found) })
}

// lock takes the store's lock file in dir (opened with the extra open
// flags, O_CREAT or none), waiting up to wait for another holder (0: it
// tries once). The returned func releases it.
func (s *FileState) lock(dir *os.File, flags int, wait time.Duration) (func(), error) {
	name := filepath.Base(s.Path) + ".lock"
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDWR|flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state lock %s: %w", filepath.Join(filepath.Dir(s.Path), name), err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil // closing releases the flock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) || wait == 0 || time.Now().After(deadline) {
			unix.Close(fd)
			return nil, fmt.Errorf("lock state file %s: %w", s.Path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// read returns the stored state; found is false when the file is absent.
// A present but unreadable, foreign or corrupt file is an error (fail
// closed): silently starting over would re-open rollback.
func (s *FileState) read(dir *os.File) (State, bool, error) {
	f, st, err := fsafe.OpenFileAt(int(dir.Fd()), filepath.Base(s.Path))
	if errors.Is(err, unix.ENOENT) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("open state file %s: %w", s.Path, err)
	}
	defer f.Close()
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return State{}, false, fmt.Errorf("state file %s must be a regular file owned by uid %d and not group/other-writable (found mode %06o, uid %d)",
			s.Path, os.Geteuid(), st.Mode, st.Uid)
	}
	data, err := fsafe.ReadAll(f, st, maxStateBytes)
	if errors.Is(err, fsafe.ErrTooLarge) {
		return State{}, false, corruptState(s.Path, err)
	}
	if err != nil {
		return State{}, false, fmt.Errorf("read state file %s: %w", s.Path, err)
	}
	var cur State
	if err := spec.DecodeStrict(data, &cur, maxStateBytes); err != nil {
		return State{}, false, corruptState(s.Path, err)
	}
	if b, err := hex.DecodeString(cur.PayloadSHA256); err != nil || len(b) != 32 || cur.Version == 0 {
		return State{}, false, corruptState(s.Path, errors.New("version must be >= 1 and payload_sha256 64 hex characters"))
	}
	return cur, true, nil
}

func corruptState(path string, err error) error {
	return fmt.Errorf("state file %s is corrupt; restore it from backup, or remove it to accept any catalog version once (this re-opens rollback): %w", path, err)
}

// write replaces the state file atomically and durably.
func (s *FileState) write(dir *os.File, next State) error {
	data, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	// A temp file beside it, fsynced, renamed over it, the directory
	// fsynced: a crash leaves the old mark or the new one.
	if err := fsafe.WriteFileAt(int(dir.Fd()), filepath.Base(s.Path), bytes.NewReader(append(data, '\n')), 0o600, fsafe.Durable); err != nil {
		return fmt.Errorf("write state file in %s: %w", filepath.Dir(s.Path), err)
	}
	return nil
}
