package walk

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// ImageFile is the image's regular file at an entry's path, opened from the
// pinned directory fd of the layer that holds it, one component, with the
// same openat2 resolve flags as everything else, and checked against the
// fstatat that found it (inode, device, type). The gate reads it to compare
// a copied-up upper file with its origin.
type ImageFile struct {
	Stat Stat // fstat of the opened fd
	fd   int
	path string
	lay  int
	ns   string // the mount's overlay xattr namespace
}

// OpenImage opens the image's file at e's path. It fails unless both e and
// the image entry are regular files; nothing else is ever opened. The
// caller closes it before the visit returns (the layer fds belong to the
// walker).
func (e *Entry) OpenImage() (*ImageFile, error) {
	img := e.Image
	if e.Kind != KindFile || img == nil || img.Kind != KindFile {
		return nil, fmt.Errorf("open image file %q: not a regular file in both the upper layer and the image", e.Path)
	}
	l, err := e.imageLayer()
	if err != nil {
		return nil, err
	}
	want := unix.Stat_t{Ino: img.Stat.Ino, Dev: img.Stat.Dev, Mode: img.Stat.Mode}
	fd, got, err := openChecked(l.fd, e.Name, unix.O_RDONLY|unix.O_NOCTTY, &want)
	if err != nil {
		return nil, fmt.Errorf("open %q in image layer %d: %w", e.Path, l.layer, err)
	}
	return &ImageFile{Stat: statOf(got), fd: fd, path: e.Path, lay: l.layer, ns: e.tree.opts.XattrNS}, nil
}

// ImageReadlink returns the target of the image's symlink at e's path (at
// most 4096 bytes), never following it.
func (e *Entry) ImageReadlink() (string, error) {
	if e.Image == nil || e.Image.Kind != KindSymlink {
		return "", fmt.Errorf("readlink image %q: the image has no symlink here", e.Path)
	}
	l, err := e.imageLayer()
	if err != nil {
		return "", err
	}
	return readlinkAt(l.fd, e.Name, e.Path)
}

// imageLayer finds the directory fd of the layer lookupLower took e.Image
// from, among the layers of e's parent directory.
func (e *Entry) imageLayer() (layerDir, error) {
	if e.dir != nil {
		for _, l := range e.dir.lowers {
			if l.layer == e.Image.Layer {
				return l, nil
			}
		}
	}
	return layerDir{}, fmt.Errorf("image %q: layer %d is not open here (entry used after its visit?)", e.Path, e.Image.Layer)
}

// Reader reads the file from offset 0 with pread.
func (f *ImageFile) Reader() io.Reader { return &fdReader{fd: f.fd} }

// Restat fstats the opened file again, to detect a change during a read.
func (f *ImageFile) Restat() (Stat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return Stat{}, fmt.Errorf("restat %q in image layer %d: %w", f.path, f.lay, err)
	}
	return statOf(&st), nil
}

// Close releases the fd.
func (f *ImageFile) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

// readlinkAt reads a symlink's target below dirfd, refusing targets longer
// than 4096 bytes.
func readlinkAt(dirfd int, name, path string) (string, error) {
	buf := make([]byte, 4097)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", fmt.Errorf("readlink %q: %w", path, err)
	}
	if n > 4096 {
		return "", fmt.Errorf("readlink %q: target longer than 4096 bytes", path)
	}
	return string(buf[:n]), nil
}
