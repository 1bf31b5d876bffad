package fsafe

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fsync is fsync(2) with the EINTR policy.
func fsync(fd int) error {
	_, err := RetryEINTR(func() (struct{}, error) { return struct{}{}, unix.Fsync(fd) })
	return err
}

// SyncDir fsyncs the directory dir, making a create, rename or remove in it
// durable. dir is the caller's path and is resolved as given (an fsync
// through a symlink changes nothing but durability).
func SyncDir(dir string) error {
	fd, err := openTrustedDir(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := fsync(fd); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// SyncTree makes the tree at dir durable: every regular file and directory
// below it is fsynced, each directory after its entries, then dir itself
// and its parent (which holds dir's own entry). dir is resolved as given;
// nothing below it is followed:
// symlinks are durable through their directory's fsync, and fifos,
// sockets and devices hold no data. The walk is bounded by maxDepth
// directory levels (an fd is held per level).
func SyncTree(dir string) error {
	fd, err := openTrustedDir(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	if err := syncDirFD(fd, dir, 0); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(dir))
}

// maxDepth bounds SyncTree's descent.
const maxDepth = 1024

// syncDirFD fsyncs what is below the directory open as fd, then fd; it
// closes fd.
func syncDirFD(fd int, path string, depth int) error {
	defer unix.Close(fd)
	if depth > maxDepth {
		return fmt.Errorf("sync %s: nested deeper than %d directories", path, maxDepth)
	}
	names, _, err := ReadNames(fd, -1)
	if err != nil {
		return fmt.Errorf("sync %s: list: %w", path, err)
	}
	for _, n := range names {
		child := filepath.Join(path, n)
		var st unix.Stat_t
		if _, err := RetryEINTR(func() (struct{}, error) {
			return struct{}{}, unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW)
		}); err != nil {
			return fmt.Errorf("sync %s: %w", child, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			cfd, err := openDir(fd, n)
			if err != nil {
				return fmt.Errorf("sync %s: %w", child, err)
			}
			if err := syncDirFD(cfd, child, depth+1); err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := syncFileAt(fd, n); err != nil {
				return fmt.Errorf("sync %s: %w", child, err)
			}
		}
	}
	if err := fsync(fd); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

func syncFileAt(dirfd int, name string) error {
	fd, err := RetryEINTR(func() (int, error) { return unix.Openat(dirfd, name, ReadFlags, 0) })
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fsync(fd)
}

// openDir opens the directory name below dirfd without following a
// symlink at its last component.
func openDir(dirfd int, name string) (int, error) {
	return RetryEINTR(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
}

// openTrustedDir opens a directory path the caller chose, following it.
func openTrustedDir(dir string) (int, error) {
	return RetryEINTR(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
}

// SyncFS is syncfs(2) of the file system holding dir: every dirty file,
// directory and journal entry of that file system is written and flushed,
// whoever wrote it. Cheaper than SyncTree for many small files (one journal
// commit instead of one per fsync), dearer when other writers keep the file
// system busy. Writeback errors are reported from Linux 5.8 on.
func SyncFS(dir string) error {
	fd, err := openTrustedDir(dir)
	if err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if _, err := RetryEINTR(func() (struct{}, error) { return struct{}{}, unix.Syncfs(fd) }); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}
