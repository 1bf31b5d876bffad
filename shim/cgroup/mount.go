package cgroup

import (
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
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
func Find() (Hierarchy, error) {
	ms, err := mountinfo.GetMounts(firstCgroup2)
	if err != nil {
		return Hierarchy{}, fmt.Errorf("find cgroup2 mount: %w", err)
	}
	return hierarchyOf(ms)
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
