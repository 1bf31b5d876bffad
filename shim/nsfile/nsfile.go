package nsfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// nsfsMagic is the filesystem magic of namespace files (NSFS_MAGIC).
const nsfsMagic = 0x6e736673

// ID identifies a namespace: its nsfs device and inode.
type ID struct{ Dev, Ino uint64 }

// IDOf is the identity of the namespace f is open on.
func IDOf(f *os.File) (ID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return ID{}, fmt.Errorf("stat namespace %s: %w", f.Name(), err)
	}
	return ID{Dev: st.Dev, Ino: st.Ino}, nil
}

// Open opens a caller-named namespace file of type nstype
// (unix.CLONE_NEWNET, ...) without side effects: the path is first opened
// O_PATH and must be an nsfs file, so a device, fifo or ordinary file
// named by a spec is never opened for reading.
func Open(path string, nstype int) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	var sf unix.Statfs_t
	if err := unix.Fstatfs(fd, &sf); err != nil {
		return nil, fmt.Errorf("statfs namespace %s: %w", path, err)
	}
	if sf.Type != nsfsMagic {
		return nil, fmt.Errorf("%s is not a namespace file (filesystem magic %#x)", path, sf.Type)
	}
	rfd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", path, err)
	}
	f := os.NewFile(uintptr(rfd), path)
	t, err := unix.IoctlRetInt(rfd, unix.NS_GET_NSTYPE)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("namespace type of %s: %w", path, err)
	}
	if t != nstype {
		f.Close()
		return nil, fmt.Errorf("%s is a namespace of type %#x, not %#x", path, t, nstype)
	}
	return f, nil
}

// OwnerOf is the identity of the user namespace that owns namespace ns.
func OwnerOf(ns *os.File) (ID, error) {
	ufd, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		return ID{}, fmt.Errorf("owner of namespace %s: %w", ns.Name(), err)
	}
	owner := os.NewFile(uintptr(ufd), "userns")
	defer owner.Close()
	return IDOf(owner)
}

// IDOfPath is the identity of the namespace file at path.
func IDOfPath(path string) (ID, error) {
	f, err := os.Open(path)
	if err != nil {
		return ID{}, fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer f.Close()
	return IDOf(f)
}

// OwnedByInitialUserns reports whether namespace ns is owned by the
// initial user namespace (the one the caller runs in, which must itself be
// the initial one: installing tables needs host root). A netns owned by
// another user namespace has another root, who holds the capabilities over
// it that the container's capability sets lack.
func OwnedByInitialUserns(ns *os.File) (bool, error) {
	got, err := OwnerOf(ns)
	if err != nil {
		return false, err
	}
	want, err := IDOfPath("/proc/self/ns/user")
	return err == nil && got == want, err
}
