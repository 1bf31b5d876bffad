package walk

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Xattr is one extended attribute as a layer stores it.
type Xattr struct {
	Name  string
	Value []byte
}

// Caps on reading one object's extended attributes. The kernel already
// refuses values above 64 KiB (XATTR_SIZE_MAX) and name lists above 64 KiB
// (XATTR_LIST_MAX); the total, names and values together, is ours.
const (
	MaxXattrValue = 64 << 10
	MaxXattrList  = 64 << 10
	MaxXattrBytes = 1 << 20
)

// ErrXattrCap reports an object whose extended attributes are over a cap;
// they were not read.
var ErrXattrCap = errors.New("extended attributes over the read cap")

// ErrNoXattrAt reports a kernel without listxattrat/getxattrat (Linux
// 6.13): the xattrs of a symlink or special file cannot be read there
// without a path-resolving call, since neither is ever opened and the f*
// calls refuse O_PATH fds.
var ErrNoXattrAt = errors.New("kernel cannot read xattrs of a symlink or special file without following it (listxattrat, Linux 6.13)")

// Xattrs returns the entry's extended attributes as the upper layer holds
// them, sorted by name, without the mount's own overlay xattrs (see
// visibleXattr). Directories and regular files are read through their fd;
// symlinks, FIFOs, sockets and devices, never opened, by name below the
// pinned parent fd without following (listxattrat with
// AT_SYMLINK_NOFOLLOW), and the name must still be the same inode
// afterwards.
func (e *Entry) Xattrs() ([]Xattr, error) {
	if e.Err != nil {
		return nil, e.Err
	}
	ns := e.tree.opts.XattrNS
	if e.fd < 0 && e.Kind == KindFile {
		want := unix.Stat_t{Ino: e.Stat.Ino, Dev: e.Stat.Dev, Mode: e.Stat.Mode}
		if err := e.open(unix.O_RDONLY|unix.O_NOCTTY, &want); err != nil {
			return nil, err
		}
	}
	if e.fd >= 0 {
		xs, err := readXattrs(fdXattrs(e.fd), ns)
		if err != nil {
			return nil, fmt.Errorf("xattrs of %q: %w", e.Path, err)
		}
		return xs, nil
	}
	xs, err := xattrsAt(e.parent, e.Name, e.Stat, ns)
	if err != nil {
		return nil, fmt.Errorf("xattrs of %q: %w", e.Path, err)
	}
	return xs, nil
}

// ImageXattrs returns the extended attributes of the image's entry at e's
// path, from the layer that holds it, read like Xattrs: regular files and
// directories through an fd opened and checked like OpenImage's, anything
// else by name without following.
func (e *Entry) ImageXattrs() ([]Xattr, error) {
	img := e.Image
	if img == nil {
		return nil, fmt.Errorf("xattrs of image %q: the image has nothing here", e.Path)
	}
	l, err := e.imageLayer()
	if err != nil {
		return nil, err
	}
	ns := e.tree.opts.XattrNS
	var flags uint64
	switch img.Kind {
	case KindFile:
		flags = unix.O_RDONLY | unix.O_NOCTTY
	case KindDir:
		flags = unix.O_RDONLY | unix.O_DIRECTORY
	default:
		xs, err := xattrsAt(l.fd, e.Name, img.Stat, ns)
		if err != nil {
			return nil, fmt.Errorf("xattrs of %q in image layer %d: %w", e.Path, l.layer, err)
		}
		return xs, nil
	}
	want := unix.Stat_t{Ino: img.Stat.Ino, Dev: img.Stat.Dev, Mode: img.Stat.Mode}
	fd, _, err := openChecked(l.fd, e.Name, flags, &want)
	if err != nil {
		return nil, fmt.Errorf("open %q in image layer %d: %w", e.Path, l.layer, err)
	}
	defer unix.Close(fd)
	xs, err := readXattrs(fdXattrs(fd), ns)
	if err != nil {
		return nil, fmt.Errorf("xattrs of %q in image layer %d: %w", e.Path, l.layer, err)
	}
	return xs, nil
}

// Xattrs returns the image file's extended attributes, read through its fd
// like Entry.Xattrs.
func (f *ImageFile) Xattrs() ([]Xattr, error) {
	xs, err := readXattrs(fdXattrs(f.fd), f.ns)
	if err != nil {
		return nil, fmt.Errorf("xattrs of %q in image layer %d: %w", f.path, f.lay, err)
	}
	return xs, nil
}

// visibleXattr reports whether a layer's xattr is one the merged view
// shows. The mount's own overlay xattrs (<ns>.overlay.*: origin, impure,
// opaque, metacopy, ...) are its bookkeeping, hidden from the merged view
// and read as markers by inspect; an escaped one (<ns>.overlay.overlay.*)
// was set through the merged mount, is shown there as <ns>.overlay.*, and
// is copied up like any other. The other namespace's overlay xattrs are
// ordinary attributes here (inspect already flags the forged markers).
func visibleXattr(name, ns string) bool {
	own := ns + ".overlay."
	return !strings.HasPrefix(name, own) || strings.HasPrefix(name, own+"overlay.")
}

// xattrIO reads one object's xattrs: flistxattr/fgetxattr on an fd, or
// listxattrat/getxattrat by name below a directory fd.
type xattrIO struct {
	list func(buf []byte) (int, error)
	get  func(name string, buf []byte) (int, error)
}

func fdXattrs(fd int) xattrIO {
	return xattrIO{
		list: func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) },
		get:  func(name string, buf []byte) (int, error) { return unix.Fgetxattr(fd, name, buf) },
	}
}

// xattrsAt reads the xattrs of name below dirfd without following it, then
// checks that name is still the object want describes.
func xattrsAt(dirfd int, name string, want Stat, ns string) ([]Xattr, error) {
	xs, err := readXattrs(atXattrs(dirfd, name), ns)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := fstatat(dirfd, name, &st); err != nil {
		return nil, fmt.Errorf("%w (restat: %w)", ErrChanged, err)
	}
	if st.Ino != want.Ino || st.Dev != want.Dev || st.Mode&unix.S_IFMT != want.Mode&unix.S_IFMT {
		return nil, fmt.Errorf("%w (inode or type differs after reading xattrs)", ErrChanged)
	}
	return xs, nil
}

// readXattrs lists and reads the visible xattrs of one object, sorted by
// name, within the caps. A file system without xattrs has none.
func readXattrs(x xattrIO, ns string) ([]Xattr, error) {
	list, err := readBounded("list xattrs", x.list, MaxXattrList)
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	total := len(list)
	var out []Xattr
	for _, b := range strings.Split(string(list), "\x00") {
		if b == "" || !visibleXattr(b, ns) {
			continue
		}
		v, err := readBounded("read xattr "+b, func(buf []byte) (int, error) { return x.get(b, buf) }, MaxXattrValue)
		if errors.Is(err, unix.ENODATA) {
			return nil, fmt.Errorf("read xattr %s: %w (listed, then gone)", b, ErrChanged)
		}
		if err != nil {
			return nil, err
		}
		if total += len(v); total > MaxXattrBytes {
			return nil, fmt.Errorf("%w: names and values above %d bytes", ErrXattrCap, MaxXattrBytes)
		}
		out = append(out, Xattr{Name: b, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// readBounded calls read with a buffer that grows to the size the kernel
// reports, refusing sizes above limit. The size can change between the
// query and the read; it retries a few times, then reports a change.
func readBounded(what string, read func([]byte) (int, error), limit int) ([]byte, error) {
	buf := make([]byte, 256)
	for range 8 {
		n, err := read(buf)
		switch err {
		case nil:
			return buf[:n], nil
		case unix.EINTR:
			continue
		case unix.E2BIG:
			return nil, fmt.Errorf("%s: %w (kernel limit)", what, ErrXattrCap)
		case unix.ERANGE:
			size, err := read(nil)
			if err != nil && err != unix.EINTR {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			if size > limit {
				return nil, fmt.Errorf("%s: %w (%d bytes, cap %d)", what, ErrXattrCap, size, limit)
			}
			buf = make([]byte, max(size, len(buf)))
			continue
		case unix.ENOSYS:
			return nil, ErrNoXattrAt
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return nil, fmt.Errorf("%s: %w (size kept changing)", what, ErrChanged)
}
