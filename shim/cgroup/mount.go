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
// The answer is kept with its mount's id, and given again while the
// mountpoint still resolves to that mount (statx STATX_MNT_ID): a shim
// asks five or six times per container, and each read of the mount table
// costs the kernel's formatting of every mount and the parse. Anything
// mounted over the mountpoint, or over a directory on the way to it,
// changes the id and the table is read again.
func Find() (Hierarchy, error) {
	found.Lock()
	defer found.Unlock()
	if found.id > 0 && mountID(found.h.Mountpoint) == found.id {
		return found.h, nil
	}
	ms, err := getMounts(firstCgroup2)
	if err != nil {
		return Hierarchy{}, fmt.Errorf("find cgroup2 mount: %w", err)
	}
	h, err := hierarchyOf(ms)
	if err == nil {
		found.h, found.id = h, ms[0].ID
	}
	return h, err
}

// found is the hierarchy Find last read and its mount's id (0: none).
var found struct {
	sync.Mutex
	h  Hierarchy
	id int
}

// getMounts reads the caller's mount table; a test counts the reads.
var getMounts = mountinfo.GetMounts

// mountID is the id of the mount path resolves to, as mountinfo's first
// field numbers it; -1 if the kernel does not say.
func mountID(path string) int {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_MNT_ID, &st); err != nil || st.Mask&unix.STATX_MNT_ID == 0 {
		return -1
	}
	return int(st.Mnt_id)
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
