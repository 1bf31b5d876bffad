package inner

import (
	"fmt"
	"os"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// cgroupRoot is where distributions mount the cgroup file systems.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupView replaces the host's cgroup file systems in the command's view
// with the run's own: cgroup v1 hierarchies are covered, and cgroup2 is
// mounted again from inside the run's cgroup namespace, so its root is the
// run's cgroup and no other cgroup of the host is visible. It must run on
// the thread that unshared the cgroup namespace, before the tree is made
// read-only (the new mounts are made read-only with it).
func cgroupView() (string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup2", "cgroup"))
	if err != nil {
		return "", fmt.Errorf("read the cgroup mounts: %w", err)
	}
	var v2 []string
	cover := false
	for _, m := range ms {
		if m.Mountpoint != cgroupRoot && within(m.Mountpoint, cgroupRoot) {
			cover = true
		}
		if m.FSType == "cgroup2" {
			v2 = append(v2, m.Mountpoint)
		}
	}
	if cover {
		if err := unix.Mount("tmpfs", cgroupRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
			return "", fmt.Errorf("cover %s: %w", cgroupRoot, err)
		}
	}
	for _, mp := range v2 {
		if cover && within(mp, cgroupRoot) && mp != cgroupRoot {
			if err := os.MkdirAll(mp, 0o755); err != nil {
				return "", fmt.Errorf("make %s: %w", mp, err)
			}
		}
		if err := unix.Mount("cgroup2", mp, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return "", fmt.Errorf("mount the run's cgroup2 at %s: %w", mp, err)
		}
	}
	if !cover && len(v2) == 0 {
		return "", nil
	}
	return cgroupRoot + " (the run's own cgroup2 view, rooted at its cgroup; no cgroup v1 hierarchy, no other cgroup of the host)", nil
}
