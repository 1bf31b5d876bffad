package hostfacts

import (
	"fmt"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/specpolicy"
)

// RootfsHost answers specpolicy.CheckRootfs from this host: paths opened
// with openat2 RESOLVE_NO_SYMLINKS, mounts placed by the mount id statx
// reports for the opened path (not by name: a later mount over a parent
// would hide a mount point's name), in the mount table read at most once.
type RootfsHost struct {
	table []*mountinfo.Info
	read  bool
}

var _ specpolicy.RootfsHost = (*RootfsHost)(nil)

// Dir opens p as a directory without following any symlink.
func (h *RootfsHost) Dir(p string) error {
	fd, err := openNoSymlinks(p)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// Mounted places p in the mount table.
func (h *RootfsHost) Mounted(p string) (specpolicy.MountedFS, error) {
	fd, err := openNoSymlinks(p)
	if err != nil {
		return specpolicy.MountedFS{}, err
	}
	defer unix.Close(fd)
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return specpolicy.MountedFS{}, fmt.Errorf("statx %s: %w", p, err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return specpolicy.MountedFS{}, fmt.Errorf("statx %s: the kernel reports no mount id (Linux 5.8 or later needed)", p)
	}
	if !h.read {
		if h.table, err = mountinfo.GetMounts(nil); err != nil {
			return specpolicy.MountedFS{}, fmt.Errorf("read the mount table: %w", err)
		}
		h.read = true
	}
	return placeMount(p, int(stx.Mnt_id), h.table)
}

// placeMount describes path p, on the mount numbered id, from table.
func placeMount(p string, id int, table []*mountinfo.Info) (specpolicy.MountedFS, error) {
	var out specpolicy.MountedFS
	found := false
	for _, m := range table {
		if m.ID == id {
			found = true
			out.Root = m.Mountpoint == p && m.Root == "/"
			out.Type, out.SuperOptions = m.FSType, m.VFSOptions
		}
		if m.Mountpoint != p && strings.HasPrefix(m.Mountpoint, strings.TrimSuffix(p, "/")+"/") {
			out.Beneath++
		}
	}
	if !found {
		return specpolicy.MountedFS{}, fmt.Errorf("mount %d of %s is not in the mount table", id, p)
	}
	return out, nil
}

func openNoSymlinks(p string) (int, error) {
	fd, err := fsafe.Openat2(unix.AT_FDCWD, p, unix.O_PATH|unix.O_DIRECTORY, unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return -1, fmt.Errorf("openat2 RESOLVE_NO_SYMLINKS %s: %w", p, err)
	}
	return fd, nil
}
