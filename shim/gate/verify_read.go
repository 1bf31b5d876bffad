package gate

// The staged tree as VerifyStaged reads it: through file descriptors
// (fsafe), never following a symlink, never opening anything but regular
// files and directories.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
)

// Bounds of the walk over staged/ that finds files the manifest does not
// list. The gate caps products far below these; past them the staging
// directory cannot match any manifest and VerifyStaged stops with an error.
const (
	maxStagedEntries = 1 << 22
	maxStagedDepth   = 1024
)

// stagedObj is what sits at one path under the operation directory.
type stagedObj struct {
	kind   string // file, dir, symlink, or the type of anything else
	size   int64  // files: bytes hashed; symlinks: target length
	sha256 string // files: content; symlinks: the target string
	target string
}

func (o stagedObj) String() string {
	switch o.kind {
	case "file", "symlink":
		return fmt.Sprintf("%s sha256 %s", o.kind, o.sha256)
	}
	return o.kind
}

// opDirFD reads below an operation directory through file descriptors:
// every component is opened O_NOFOLLOW, so neither a symlink at a leaf nor
// one in the middle of a path is followed, and nothing is opened that is not
// a regular file or a directory.
type opDirFD struct {
	fd   int
	path string
}

func openOpDir(dir string) (*opDirFD, error) {
	fd, err := fsafe.OpenDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		return nil, err
	}
	return &opDirFD{fd: fd, path: dir}, nil
}

func (d *opDirFD) close() { unix.Close(d.fd) }

// errAbsent marks a path that is not there as a directory chain of real
// directories: missing, or a component that is a symlink or not a directory.
var errAbsent = errors.New("not found")

// parent opens the directory holding rel ('/'-separated, clean, relative)
// and returns its fd and rel's last component.
func (d *opDirFD) parent(rel string) (int, string, error) {
	dir, name := path.Split(rel)
	fd, err := fsafe.Walker{Flags: unix.O_RDONLY | unix.O_DIRECTORY}.Open(d.fd, strings.TrimSuffix(dir, "/"))
	if err != nil {
		if absentErr(err) {
			return -1, "", fmt.Errorf("%s: %w (%v)", rel, errAbsent, err)
		}
		return -1, "", fmt.Errorf("open %s: %w", rel, err)
	}
	return fd, name, nil
}

func absentErr(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// inspect reports what is at rel without following it: fstatat first, then
// for a regular file an O_NOFOLLOW|O_NONBLOCK open whose fstat must match
// (same inode, still regular) before a byte is hashed.
func (d *opDirFD) inspect(rel string) (stagedObj, error) {
	dfd, name, err := d.parent(rel)
	if err != nil {
		return stagedObj{}, err
	}
	defer unix.Close(dfd)
	return inspectAt(dfd, name, rel)
}

func inspectAt(dfd int, name, rel string) (stagedObj, error) {
	st, err := statAt(dfd, name, rel)
	if err != nil {
		return stagedObj{}, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return stagedObj{kind: "dir"}, nil
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return stagedObj{}, fmt.Errorf("readlink %s: %w", rel, err)
		}
		sum := sha256.Sum256(buf[:n])
		return stagedObj{kind: "symlink", size: int64(n), sha256: hex.EncodeToString(sum[:]), target: string(buf[:n])}, nil
	case unix.S_IFREG:
		return hashAt(dfd, name, rel, st)
	}
	return stagedObj{kind: fsafe.Kind(st.Mode)}, nil
}

// statAt is fstatat of name below dfd without following it.
func statAt(dfd int, name, rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return st, fmt.Errorf("%s: %w", rel, errAbsent)
		}
		return st, fmt.Errorf("stat %s: %w", rel, err)
	}
	return st, nil
}

func hashAt(dfd int, name, rel string, lst unix.Stat_t) (stagedObj, error) {
	f, st, err := fsafe.OpenFileAt(dfd, name)
	if err != nil {
		return stagedObj{}, fmt.Errorf("open %s: %w", rel, err)
	}
	defer f.Close()
	if st.Dev != lst.Dev || st.Ino != lst.Ino {
		return stagedObj{}, fmt.Errorf("open %s: replaced while read", rel)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, st.Size))
	if err != nil {
		return stagedObj{}, fmt.Errorf("read %s: %w", rel, err)
	}
	return stagedObj{kind: "file", size: n, sha256: hex.EncodeToString(h.Sum(nil))}, nil
}

// visitFunc is called for each object of a walkTree at rel; inspect reads
// it as opDirFD.inspect would (hashing a file), for fn to call only when it
// needs the object. It returns whether to descend into a directory.
type visitFunc func(rel string, inspect func() (stagedObj, error)) (bool, error)

// walkTree calls fn for every object below rel (a directory), depth first,
// names sorted.
func (d *opDirFD) walkTree(rel string, fn visitFunc) error {
	dfd, name, err := d.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	fd, err := fsafe.OpenDirAt(dfd, name)
	if err != nil {
		if absentErr(err) {
			return fmt.Errorf("%s: %w", rel, errAbsent)
		}
		return fmt.Errorf("open %s: %w", rel, err)
	}
	count := 0
	return walkFD(fd, rel, 0, &count, fn)
}

// walkFD owns fd and closes it.
func walkFD(fd int, rel string, depth int, count *int, fn visitFunc) error {
	defer unix.Close(fd)
	if depth > maxStagedDepth {
		return fmt.Errorf("%s is nested deeper than %d directories; stopped", rel, maxStagedDepth)
	}
	names, _, err := fsafe.ReadNames(fd, -1)
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	slices.Sort(names)
	for _, n := range names {
		if *count++; *count > maxStagedEntries {
			return fmt.Errorf("more than %d entries below the staging directory; stopped", maxStagedEntries)
		}
		child := rel + "/" + n
		st, err := statAt(fd, n, child)
		if err != nil {
			return err
		}
		descend, err := fn(child, func() (stagedObj, error) { return inspectAt(fd, n, child) })
		if err != nil {
			return err
		}
		if !descend || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		cfd, err := fsafe.OpenDirAt(fd, n)
		if err != nil {
			return fmt.Errorf("open %s: %w", child, err)
		}
		if err := walkFD(cfd, child, depth+1, count, fn); err != nil {
			return err
		}
	}
	return nil
}
