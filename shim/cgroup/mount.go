package cgroup

import (
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// ErrNoCgroup2 means no cgroup2 file system is mounted in the caller's mount
// namespace.
var ErrNoCgroup2 = errors.New("no cgroup2 mount in /proc/self/mountinfo")

// Hierarchy is the cgroup2 hierarchy as mounted in the caller's mount
// namespace. The zero value is not usable; get one from Find.
type Hierarchy struct {
	// Mountpoint is where cgroup2 is mounted, e.g. /sys/fs/cgroup or, on
	// hybrid hosts, /sys/fs/cgroup/unified.
	Mountpoint string
	// Root is the cgroup path the mount exposes at Mountpoint ("/" unless
	// the mount was made inside a cgroup namespace or is a bind mount).
	Root string
}

// Find reads the caller's mount table (moby/sys/mountinfo, as containerd
// does) and returns the cgroup2 hierarchy: the first cgroup2 mount, wherever
// it is (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host).
//
// The answer is kept with its mount's unique id (statx STATX_MNT_ID_UNIQUE,
// never reused while the system runs) and given again while the
// mountpoint still resolves to that mount: a shim asks five or six times
// per container, and each read of the mount table costs the kernel's
// formatting of every mount and the parse. A mount replaced, or anything
// mounted over the mountpoint or over a directory on the way to it,
// changes the id, and the table is read again. A kernel without unique
// mount ids (before 6.8) gets no keeping: every Find reads the table.
func Find() (Hierarchy, error) {
	found.Lock()
	defer found.Unlock()
	if found.unique != 0 && uniqueMountID(found.h.Mountpoint) == found.unique {
		return found.h, nil
	}
	ms, err := getMounts(firstCgroup2)
	if err != nil {
		return Hierarchy{}, fmt.Errorf("find cgroup2 mount: %w", err)
	}
	h, err := hierarchyOf(ms)
	found.h, found.unique = h, 0
	if err == nil {
		found.unique = uniqueIDOf(h.Mountpoint, ms[0].ID)
	}
	return h, err
}

// found is the hierarchy Find last read and its mount's unique id (0:
// none to keep).
var found struct {
	sync.Mutex
	h      Hierarchy
	unique uint64
}

// getMounts reads the caller's mount table; a test counts the reads.
var getMounts = mountinfo.GetMounts

// uniqueIDOf is the unique id of the mount path resolves to, if that is
// the mount the table numbered id (mountinfo's reusable id, asked before
// and after: a mount swapped in between shows), else 0.
func uniqueIDOf(path string, id int) uint64 {
	before := mountID(path, unix.STATX_MNT_ID)
	unique := mountID(path, unix.STATX_MNT_ID_UNIQUE)
	if before != uint64(id) || mountID(path, unix.STATX_MNT_ID) != before {
		return 0
	}
	return unique
}

// uniqueMountID is the unique id of the mount path resolves to, 0 if the
// kernel does not say.
func uniqueMountID(path string) uint64 { return mountID(path, unix.STATX_MNT_ID_UNIQUE) }

// mountID asks statx for the mount id kind (STATX_MNT_ID or
// STATX_MNT_ID_UNIQUE) of the mount path resolves to; 0 if the kernel does
// not give that kind.
func mountID(path string, kind int) uint64 {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, kind, &st); err != nil || st.Mask&uint32(kind) == 0 {
		return 0
	}
	return st.Mnt_id
}

// FindIn reads a mountinfo table (as /proc/self/mountinfo prints it) and
// returns its first cgroup2 mount.
func FindIn(table io.Reader) (Hierarchy, error) {
	ms, err := mountinfo.GetMountsFromReader(table, firstCgroup2)
	if err != nil {
		return Hierarchy{}, fmt.Errorf("read mountinfo: %w", err)
	}
	return hierarchyOf(ms)
}

// firstCgroup2 keeps the first cgroup2 mount and stops there.
func firstCgroup2(m *mountinfo.Info) (skip, stop bool) {
	return m.FSType != "cgroup2", m.FSType == "cgroup2"
}

func hierarchyOf(ms []*mountinfo.Info) (Hierarchy, error) {
	if len(ms) == 0 {
		return Hierarchy{}, fmt.Errorf("%w: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with systemd.unified_cgroup_hierarchy", ErrNoCgroup2)
	}
	return Hierarchy{Mountpoint: ms[0].Mountpoint, Root: ms[0].Root}, nil
}

// Dir returns the directory of cgroup path p ("/a/b") under the mount. It
// refuses paths that are not absolute, not clean, or outside the mount's root,
// so a crafted path can never name a directory outside the hierarchy.
func (h Hierarchy) Dir(p string) (string, error) {
	if h.Mountpoint == "" {
		return "", fmt.Errorf("cgroup dir of %q: hierarchy not found (use cgroup.Find)", p)
	}
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return "", fmt.Errorf("cgroup dir of %q: want an absolute, clean cgroup path like /a/b", p)
	}
	root := h.Root
	if root == "" {
		root = "/"
	}
	rel := p
	if root != "/" {
		if p != root && !strings.HasPrefix(p, root+"/") {
			return "", fmt.Errorf("cgroup dir of %q: outside the cgroup2 mount's root %q", p, root)
		}
		rel = strings.TrimPrefix(p, root)
	}
	return filepath.Join(h.Mountpoint, rel), nil
}
