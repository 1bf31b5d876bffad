package service

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// nsfsMagic is the filesystem magic of namespace files (NSFS_MAGIC).
const nsfsMagic = 0x6e736673

// nsID identifies a namespace: its nsfs inode and device.
type nsID struct{ dev, ino uint64 }

func nsIDOf(f *os.File) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nsID{}, fmt.Errorf("stat namespace %s: %w", f.Name(), err)
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}

// openNamespace opens a caller-named namespace file of type nstype
// (unix.CLONE_NEWNET, ...) without side effects: the path is first opened
// O_PATH and must be an nsfs file, so a device, fifo or ordinary file
// named by a spec is never opened for reading.
func openNamespace(path string, nstype int) (*os.File, error) {
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

// ownerOf is the identity of the user namespace that owns namespace ns.
func ownerOf(ns *os.File) (nsID, error) {
	ufd, err := unix.IoctlRetInt(int(ns.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		return nsID{}, fmt.Errorf("owner of namespace %s: %w", ns.Name(), err)
	}
	owner := os.NewFile(uintptr(ufd), "userns")
	defer owner.Close()
	return nsIDOf(owner)
}

// nsIDOfPath is the identity of the namespace file at path.
func nsIDOfPath(path string) (nsID, error) {
	f, err := os.Open(path)
	if err != nil {
		return nsID{}, fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer f.Close()
	return nsIDOf(f)
}

// ownedByInitialUserns reports whether namespace ns is owned by the
// initial user namespace (the one this shim runs in, which must itself be
// the initial one: the shim needs host root to install tables). A netns
// owned by another user namespace has another root, who holds the
// capabilities over it that the container's capability sets lack.
func ownedByInitialUserns(ns *os.File) (bool, error) {
	got, err := ownerOf(ns)
	if err != nil {
		return false, err
	}
	want, err := nsIDOfPath("/proc/self/ns/user")
	return err == nil && got == want, err
}

// checkJoinedNetns refuses a netns joined by path unless it is a network
// namespace owned by the initial user namespace, or by the user namespace
// the container itself joins (a Kubernetes pod's, whose netns CRI makes
// inside it): any other owner has a root the capability policy does not
// bind. It returns the namespace's identity, which bind compares with the
// netns the init really joined.
func checkJoinedNetns(path string, u userns) (nsID, error) {
	f, err := openNamespace(path, unix.CLONE_NEWNET)
	if err != nil {
		return nsID{}, refuse("netns_path", "linux.namespaces network path %q: %v; join an existing network namespace file (e.g. /var/run/netns/NAME)", path, err)
	}
	defer f.Close()
	ok, err := ownedByInitialUserns(f)
	if err != nil {
		return nsID{}, refuse("netns_path", "linux.namespaces network path %q: %v", path, err)
	}
	if !ok && u.path != "" {
		owner, oerr := ownerOf(f)
		uf, uerr := openNamespace(u.path, unix.CLONE_NEWUSER)
		if oerr == nil && uerr == nil {
			want, _ := nsIDOf(uf)
			uf.Close()
			ok = owner == want
		}
	}
	if !ok {
		return nsID{}, refuse("netns_foreign_userns", "linux.namespaces network path %q is owned by a user namespace that is neither the host's nor the container's own, whose root can delete the container's network table; join a network namespace created by host root or by the container's user namespace", path)
	}
	return nsIDOf(f)
}
