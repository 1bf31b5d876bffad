package fsafe

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Durability says whether a replace survives a crash of the machine.
type Durability bool

const (
	// Durable fsyncs the new file before the rename and the directory
	// after it: once WriteFile returns, a crash leaves the new file.
	Durable Durability = true
	// NotDurable skips both fsyncs: readers still see the old file or the
	// new one, but a crash may leave the old one (or none, for a new path).
	// Only for files whose meaning ends at reboot, or whose loss is safe.
	NotDurable Durability = false
)

// WriteFile replaces path atomically with what r yields, mode perm exactly
// (whatever the umask): a temp file beside it, created O_EXCL|O_NOFOLLOW,
// written, then renamed over path; d decides the fsyncs. Readers see the
// old file or the new one, never a torn one. On failure the temp file is
// removed and path is untouched. path's directory is the caller's (it is
// resolved as given); the temp file and the rename are relative to its fd.
func WriteFile(path string, r io.Reader, perm os.FileMode, d Durability) error {
	p, err := Prepare(path, r, perm, d)
	if err != nil {
		return err
	}
	return p.Commit()
}

// WriteFileAt is WriteFile for name in the directory open as dirfd.
func WriteFileAt(dirfd int, name string, r io.Reader, perm os.FileMode, d Durability) error {
	return replaceAt(dirfd, name, name, r, perm, d)
}

func replaceAt(dfd int, name, shown string, r io.Reader, perm os.FileMode, d Durability) error {
	p, err := stageAt(dfd, name, shown, r, perm, d)
	if err != nil {
		return err
	}
	return p.commit()
}

// Pending is a file written under a temporary name beside its path, not
// yet in place (Prepare): Commit renames it over the path, Abort removes
// it. Readers see the old file or the new one, never a torn one, and a
// crash before Commit leaves only the temporary name (dot-prefixed).
type Pending struct {
	dfd              int
	own              bool // dfd is the Pending's, closed at the end
	tmp, name, shown string
	d                Durability
}

// Prepare writes what r yields to a temp file beside path, as WriteFile
// does, and leaves it there: the write and, when d is Durable, its fsync
// are done before Commit, which then costs a rename and the directory's
// fsync. Exactly one of Commit and Abort must follow.
func Prepare(path string, r io.Reader, perm os.FileMode, d Durability) (*Pending, error) {
	dir := filepath.Dir(path)
	dfd, err := openTrustedDir(dir)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, &os.PathError{Op: "open", Path: dir, Err: err})
	}
	p, err := stageAt(dfd, filepath.Base(path), path, r, perm, d)
	if err != nil {
		unix.Close(dfd)
		return nil, err
	}
	p.own = true
	return p, nil
}

// Commit puts the prepared file in place (and, Durable, fsyncs the
// directory); on failure the temp file is removed.
func (p *Pending) Commit() error {
	defer p.release()
	return p.commit()
}

// Abort removes the prepared file; its path is untouched.
func (p *Pending) Abort() {
	defer p.release()
	unix.Unlinkat(p.dfd, p.tmp, 0)
}

func (p *Pending) release() {
	if p.own {
		unix.Close(p.dfd)
	}
}

// stageAt writes and (Durable) fsyncs a temp file beside name in dfd.
func stageAt(dfd int, name, shown string, r io.Reader, perm os.FileMode, d Durability) (_ *Pending, retErr error) {
	f, tmp, err := createTemp(dfd, name, perm)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", shown, err)
	}
	defer func() {
		if retErr != nil {
			f.Close()
			unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return nil, fmt.Errorf("write %s: %w", shown, err)
	}
	if d == Durable {
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("sync %s: %w", shown, err)
		}
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close %s: %w", shown, err)
	}
	return &Pending{dfd: dfd, tmp: tmp, name: name, shown: shown, d: d}, nil
}

// commit renames the staged file into place and (Durable) fsyncs the
// directory; a failed rename removes the staged file.
func (p *Pending) commit() error {
	if err := unix.Renameat(p.dfd, p.tmp, p.dfd, p.name); err != nil {
		unix.Unlinkat(p.dfd, p.tmp, 0)
		return fmt.Errorf("rename into %s: %w", p.shown, err)
	}
	if p.d == Durable {
		if err := fsync(p.dfd); err != nil {
			return fmt.Errorf("sync dir of %s: %w", p.shown, err)
		}
	}
	return nil
}

func createTemp(dfd int, name string, perm os.FileMode) (*os.File, string, error) {
	for range 100 {
		tmp := "." + name + ".tmp-" + strconv.FormatUint(uint64(rand.Uint32()), 10)
		fd, err := RetryEINTR(func() (int, error) {
			return unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		})
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return nil, "", &os.PathError{Op: "create", Path: tmp, Err: err}
		}
		if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil { // the umask may have cut bits
			unix.Close(fd)
			unix.Unlinkat(dfd, tmp, 0)
			return nil, "", &os.PathError{Op: "chmod", Path: tmp, Err: err}
		}
		return os.NewFile(uintptr(fd), tmp), tmp, nil
	}
	return nil, "", &os.PathError{Op: "create", Path: "." + name + ".tmp-*", Err: unix.EEXIST}
}
