package promote

// A product as objects below a directory fd: read (hashing every file),
// copied (hashing what is written), compared and removed, never following
// a symlink and never opening anything but regular files and directories.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
)

// maxDepth bounds the nesting of a product tree (the gate caps products at
// 256 levels).
const maxDepth = 256

// item is one object of a product: its path relative to the product (""
// for the product itself), its type, permission bits, size (files: bytes;
// symlinks: the target's length; directories: 0) and sha256 (files: the
// content; symlinks: the target string), and a symlink's target.
type item struct {
	rel    string
	typ    string // file, dir, symlink, or the kind of anything else
	perm   uint32
	size   int64
	sha256 string
	target string
}

// errTooMany: an object holds more entries than its record can account for.
var errTooMany = errors.New("more entries than the manifest records")

// walkBudget bounds one read or copy.
type walkBudget struct{ left int }

func (b *walkBudget) take() error {
	if b.left--; b.left < 0 {
		return errTooMany
	}
	return nil
}

// readObject reads what is at name below dirfd, without following it:
// every object of a directory, depth first, names sorted. At most limit
// objects are read.
func readObject(dirfd int, name string, limit int) ([]item, error) {
	var out []item
	b := &walkBudget{left: limit}
	err := readAt(dirfd, name, "", 0, b, &out)
	return out, err
}

func readAt(dirfd int, name, rel string, depth int, b *walkBudget, out *[]item) error {
	if err := b.take(); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "stat", Path: shown(rel, name), Err: err}
	}
	it := item{rel: rel, perm: st.Mode & 0o7777}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, fst, err := fsafe.OpenFileAt(dirfd, name)
		if err != nil {
			return err
		}
		defer f.Close()
		if fst.Dev != st.Dev || fst.Ino != st.Ino {
			return fmt.Errorf("read %s: replaced while read", shown(rel, name))
		}
		h := sha256.New()
		n, err := io.Copy(h, io.LimitReader(f, fst.Size))
		if err != nil {
			return fmt.Errorf("read %s: %w", shown(rel, name), err)
		}
		it.typ, it.size, it.sha256 = "file", n, hex.EncodeToString(h.Sum(nil))
		*out = append(*out, it)
	case unix.S_IFLNK:
		target, err := readlinkAt(dirfd, name)
		if err != nil {
			return fmt.Errorf("readlink %s: %w", shown(rel, name), err)
		}
		sum := sha256.Sum256([]byte(target))
		it.typ, it.size, it.sha256, it.target = "symlink", int64(len(target)), hex.EncodeToString(sum[:]), target
		*out = append(*out, it)
	case unix.S_IFDIR:
		it.typ = "dir"
		*out = append(*out, it)
		if depth >= maxDepth {
			return fmt.Errorf("%s is nested deeper than %d directories", shown(rel, name), maxDepth)
		}
		fd, err := fsafe.OpenDirAt(dirfd, name)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		names, _, err := fsafe.ReadNames(fd, int64(b.left)+1)
		if err != nil {
			return fmt.Errorf("list %s: %w", shown(rel, name), err)
		}
		slices.Sort(names)
		for _, n := range names {
			if err := readAt(fd, n, path.Join(rel, n), depth+1, b, out); err != nil {
				return err
			}
		}
	default:
		it.typ = fsafe.Kind(st.Mode)
		*out = append(*out, it)
	}
	return nil
}

// copyOptions say what a copy may write.
type copyOptions struct {
	limit     int  // objects at most
	allowExec bool // files with an execute bit may be written
}

// errExecutable: a file with an execute bit, where none may be placed.
type errExecutable struct{ rel string }

func (e *errExecutable) Error() string { return e.rel + " is executable" }

// copyObject copies the object name below src to the new name dstName
// below dst (which must not exist), hashing every file as it writes it,
// with the source's permission bits less setuid, setgid, sticky and
// group/other write (perm & 0755), every file and directory fsynced. It
// returns what it wrote, as readObject would read it back. On failure
// what it created may remain; the caller removes dstName.
func copyObject(src int, name string, dst int, dstName string, o copyOptions) ([]item, error) {
	var out []item
	b := &walkBudget{left: o.limit}
	err := copyAt(src, name, dst, dstName, "", 0, b, o, &out)
	return out, err
}

func copyAt(src int, name string, dst int, dstName, rel string, depth int, b *walkBudget, o copyOptions, out *[]item) error {
	if err := b.take(); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(src, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "stat", Path: shown(rel, name), Err: err}
	}
	perm := st.Mode & 0o755
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if perm&0o111 != 0 && !o.allowExec {
			return &errExecutable{rel: shown(rel, name)}
		}
		it, err := copyFile(src, name, dst, dstName, perm, st)
		if err != nil {
			return fmt.Errorf("copy %s: %w", shown(rel, name), err)
		}
		it.rel = rel
		*out = append(*out, it)
	case unix.S_IFLNK:
		target, err := readlinkAt(src, name)
		if err != nil {
			return fmt.Errorf("readlink %s: %w", shown(rel, name), err)
		}
		if err := unix.Symlinkat(target, dst, dstName); err != nil {
			return fmt.Errorf("symlink %s: %w", shown(rel, name), err)
		}
		sum := sha256.Sum256([]byte(target))
		*out = append(*out, item{rel: rel, typ: "symlink", perm: 0o777, size: int64(len(target)), sha256: hex.EncodeToString(sum[:]), target: target})
	case unix.S_IFDIR:
		if depth >= maxDepth {
			return fmt.Errorf("%s is nested deeper than %d directories", shown(rel, name), maxDepth)
		}
		*out = append(*out, item{rel: rel, typ: "dir", perm: perm})
		return copyDir(src, name, dst, dstName, rel, perm, depth, b, o, out)
	default:
		return fmt.Errorf("%s is a %s; only files, directories and symlinks are products", shown(rel, name), fsafe.Kind(st.Mode))
	}
	return nil
}

func copyDir(src int, name string, dst int, dstName, rel string, perm uint32, depth int, b *walkBudget, o copyOptions, out *[]item) error {
	sfd, err := fsafe.OpenDirAt(src, name)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	// 0700 while it is filled: nobody but root reaches into it before the
	// rename, whatever the root's other users may do.
	if err := unix.Mkdirat(dst, dstName, 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", shown(rel, name), err)
	}
	dfd, err := fsafe.OpenDirAt(dst, dstName)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	names, _, err := fsafe.ReadNames(sfd, int64(b.left)+1)
	if err != nil {
		return fmt.Errorf("list %s: %w", shown(rel, name), err)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := copyAt(sfd, n, dfd, n, path.Join(rel, n), depth+1, b, o, out); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(dfd, perm); err != nil {
		return fmt.Errorf("chmod %s: %w", shown(rel, name), err)
	}
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("sync %s: %w", shown(rel, name), err)
	}
	return nil
}

// copyFile writes the regular file name below src (stat st) as dstName
// below dst, hashing what it writes.
func copyFile(src int, name string, dst int, dstName string, perm uint32, st unix.Stat_t) (item, error) {
	in, ist, err := fsafe.OpenFileAt(src, name)
	if err != nil {
		return item{}, err
	}
	defer in.Close()
	if ist.Dev != st.Dev || ist.Ino != st.Ino {
		return item{}, errors.New("replaced while read")
	}
	fd, err := fsafe.RetryEINTR(func() (int, error) {
		return unix.Openat(dst, dstName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return item{}, err
	}
	outf := os.NewFile(uintptr(fd), dstName)
	defer outf.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(outf, h), io.LimitReader(in, ist.Size))
	if err != nil {
		return item{}, err
	}
	if err := outf.Chmod(os.FileMode(perm)); err != nil {
		return item{}, err
	}
	if err := outf.Sync(); err != nil {
		return item{}, err
	}
	if err := outf.Close(); err != nil {
		return item{}, err
	}
	return item{typ: "file", perm: perm, size: n, sha256: hex.EncodeToString(h.Sum(nil))}, nil
}

// removeObject removes name below dirfd and, for a directory, everything
// in it, never following a symlink. Only for what a promotion created.
func removeObject(dirfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dirfd, name, 0)
	}
	fd, err := fsafe.OpenDirAt(dirfd, name)
	if err != nil {
		return err
	}
	names, _, err := fsafe.ReadNames(fd, -1)
	if err == nil {
		for _, n := range names {
			if rerr := removeObject(fd, n); rerr != nil && err == nil {
				err = rerr
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// shown is an object's path in messages: its path below the product, or
// the product's own name.
func shown(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel
}
