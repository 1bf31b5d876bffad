package walk

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// Entry is one object below the root, as fstatat saw it (and, for opened
// directories and regular files, as fstat on the opened fd confirmed it).
type Entry struct {
	Path   string // relative to the root, '/'-separated
	Name   string // last component, raw bytes from the directory
	Depth  int    // 1 for children of the root
	Kind   Kind
	Stat   Stat
	Opaque bool   // overlay: opaque directory in the mount's namespace
	Marks  []Mark // overlay markers that must not be trusted
	Image  *Image // overlay: what the image has at this path; nil if nothing
	Err    error  // the entry could not be examined consistently (wraps ErrChanged when it moved)

	tree   *Tree
	dir    *dirState // parent directory, owned by the walker
	parent int       // parent directory fd
	fd     int       // opened directory or regular file, -1 if not opened
}

// entry examines one directory entry: fstatat first, then (directories
// always; regular files in overlay mode, to read their markers) an openat2
// checked against the stat. Nothing else is opened.
func (t *Tree) entry(d *dirState, name string) *Entry {
	e := &Entry{Path: join(d.path, name), Name: name, Depth: d.depth + 1, tree: t, dir: d, parent: d.fd, fd: -1}
	var st unix.Stat_t
	if err := fstatat(d.fd, name, &st); err != nil {
		if err == unix.ENOENT {
			err = fmt.Errorf("%w (vanished)", ErrChanged)
		}
		e.Err = fmt.Errorf("fstatat %q: %w", e.Path, err)
		return e
	}
	e.Kind, e.Stat = kindOf(&st, t.opts.Overlay), statOf(&st)
	if len(d.lowers) > 0 {
		img, err := lookupLower(d.lowers, name)
		if err != nil {
			e.Err = err
			return e
		}
		e.Image = img
	}
	var flags uint64
	switch {
	case e.Kind == KindDir:
		flags = unix.O_RDONLY | unix.O_DIRECTORY
	case e.Kind == KindFile && t.opts.Overlay:
		flags = unix.O_RDONLY | unix.O_NOCTTY
	default:
		return e
	}
	if err := e.open(flags, &st); err != nil {
		return e
	}
	if t.opts.Overlay {
		opaque, marks, err := inspect(e.fd, t.opts.XattrNS, e.Kind == KindDir)
		if err != nil {
			e.Err = fmt.Errorf("inspect %q: %w", e.Path, err)
			return e
		}
		e.Opaque, e.Marks = opaque, marks
	}
	return e
}

func (e *Entry) open(flags uint64, want *unix.Stat_t) error {
	fd, got, err := openChecked(e.parent, e.Name, flags, want)
	if err != nil {
		e.Err = fmt.Errorf("%q: %w", e.Path, err)
		return e.Err
	}
	e.fd, e.Stat = fd, statOf(got)
	return nil
}

func (e *Entry) close() {
	if e.fd >= 0 {
		unix.Close(e.fd)
		e.fd = -1
	}
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// Reader returns a reader over a regular file's bytes from offset 0,
// opening the file (checked against the stat) if the walker has not
// already. Readers use pread, so several products may read one entry. The
// walker closes the fd after the visit; callers must not keep the reader.
func (e *Entry) Reader() (io.Reader, error) {
	if e.Kind != KindFile {
		return nil, fmt.Errorf("read %q: not a regular file (%s)", e.Path, e.Kind)
	}
	if e.Err != nil {
		return nil, e.Err
	}
	if e.fd < 0 {
		want := unix.Stat_t{Ino: e.Stat.Ino, Dev: e.Stat.Dev, Mode: e.Stat.Mode}
		if err := e.open(unix.O_RDONLY|unix.O_NOCTTY, &want); err != nil {
			return nil, err
		}
	}
	return &fdReader{fd: e.fd}, nil
}

// Restat fstats the opened regular file again, to detect a file that changed
// while it was read.
func (e *Entry) Restat() (Stat, error) {
	if e.fd < 0 {
		return Stat{}, fmt.Errorf("restat %q: not opened", e.Path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(e.fd, &st); err != nil {
		return Stat{}, fmt.Errorf("restat %q: %w", e.Path, err)
	}
	return statOf(&st), nil
}

// Readlink returns a symlink's target (at most 4096 bytes). It never follows
// the link.
func (e *Entry) Readlink() (string, error) {
	if e.Kind != KindSymlink {
		return "", fmt.Errorf("readlink %q: not a symlink", e.Path)
	}
	return readlinkAt(e.parent, e.Name, e.Path)
}

type fdReader struct {
	fd  int
	off int64
}

func (r *fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Pread(r.fd, p, r.off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF
		}
		r.off += int64(n)
		return n, nil
	}
}

// ImageHasEntries reports whether the image has a directory with at least
// one visible entry at this directory's path that the upper layer does not
// hide. When it does, an upper directory here holds only a delta.
func (e *Entry) ImageHasEntries() (bool, error) {
	if e.Kind != KindDir || e.Image == nil || e.Image.Kind != KindDir || e.Opaque {
		return false, nil
	}
	stack, err := descendLower(e.dir.lowers, e.Name, e.tree.opts.XattrNS)
	if err != nil {
		return false, fmt.Errorf("image entries of %q: %w", e.Path, err)
	}
	defer closeLayers(stack)
	ok, err := hasVisible(stack)
	if err != nil {
		return false, fmt.Errorf("image entries of %q: %w", e.Path, err)
	}
	return ok, nil
}
