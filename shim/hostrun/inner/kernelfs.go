package inner

import (
	"errors"
	"fmt"
	"slices"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// kernelFS are the file system types the command's view covers wherever
// they are mounted outside the run's own /proc and /dev (a schroot's or a
// debootstrap chroot's /srv/chroot/proc, a second devpts, pinned BPF
// objects), each with why: an allowlist of what the view may keep would
// hide the host's data, so this names every kernel file system that
// exposes host processes, IPC or kernel control. sysfs stays (it is the
// read-only /sys the command sees anyway); cgroup2 is mounted again from
// the run's cgroup namespace (cgroupView); FUSE and autofs are not kernel
// file systems of this kind (they serve the host's data).
var kernelFS = map[string]string{
	"proc":        "host processes",
	"devpts":      "host terminals",
	"mqueue":      "host POSIX message queues",
	"nsfs":        "host namespaces",
	"bpf":         "pinned BPF objects",
	"cgroup":      "a cgroup v1 hierarchy (host processes)",
	"hugetlbfs":   "shared huge-page memory",
	"debugfs":     "kernel debug control",
	"tracefs":     "kernel tracing",
	"securityfs":  "LSM policy",
	"configfs":    "kernel object configuration",
	"fusectl":     "FUSE connection control",
	"binfmt_misc": "binary format handlers",
	"efivarfs":    "EFI variables",
	"pstore":      "kernel crash records",
	"rpc_pipefs":  "RPC upcalls to host daemons",
}

// kernelMount is one mount the view (finish) covers.
type kernelMount struct {
	path, fstype string
	dev          uint64
}

// kernelMounts picks, from the mount table, the mounts of kernelFS types
// outside the trees the view replaces whole (skip), parents first: a mount
// below one already covered is then no longer visible and is skipped.
func kernelMounts(ms []*mountinfo.Info, skip []string) []kernelMount {
	var out []kernelMount
next:
	for _, m := range ms {
		if _, ok := kernelFS[m.FSType]; !ok {
			continue
		}
		for _, s := range skip {
			if within(m.Mountpoint, s) {
				continue next
			}
		}
		if m.FSType == "cgroup" && within(m.Mountpoint, cgroupRoot) {
			continue // cgroupView covers it
		}
		out = append(out, kernelMount{path: m.Mountpoint, fstype: m.FSType, dev: unix.Mkdev(uint32(m.Major), uint32(m.Minor))})
	}
	slices.SortStableFunc(out, func(a, b kernelMount) int {
		if a.path < b.path {
			return -1
		}
		if a.path > b.path {
			return 1
		}
		return 0
	})
	return out
}

// maskKernelMounts covers each mount of ms that is visible at its path
// (the file there is on that mount's device: not shadowed by a later mount
// nor under one covered already) with an empty read-only tmpfs, or the
// mask file when it is not a directory. It returns one masked-list line
// per mount covered; a mount it cannot cover fails the run.
func maskKernelMounts(ms []kernelMount) ([]string, error) {
	var out []string
	for _, m := range ms {
		fd, err := unix.Open(m.path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("open the %s mount at %s to cover it: %w", m.fstype, m.path, err)
		}
		covered, err := coverKernelMount(fd, m)
		unix.Close(fd)
		if err != nil {
			return out, err
		}
		if covered {
			out = append(out, fmt.Sprintf("%s (%s: %s; covered with an empty read-only tmpfs)", m.path, m.fstype, kernelFS[m.fstype]))
		}
	}
	return out, nil
}

// coverKernelMount covers the file fd names, if it is on m's device.
func coverKernelMount(fd int, m kernelMount) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("stat the %s mount at %s: %w", m.fstype, m.path, err)
	}
	if st.Dev != m.dev {
		return false, nil // shadowed, or under a mount covered already
	}
	var over int
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		over, err = emptyTmpfs()
	} else {
		over, err = unix.OpenTree(unix.AT_FDCWD, maskFile, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err == nil {
			err = unix.MountSetattr(over, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		}
	}
	if err != nil {
		if over > 0 {
			unix.Close(over)
		}
		return false, fmt.Errorf("make the cover of the %s mount at %s: %w", m.fstype, m.path, err)
	}
	defer unix.Close(over)
	if err := unix.MoveMount(over, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return false, fmt.Errorf("cover the %s mount at %s: %w", m.fstype, m.path, err)
	}
	return true, nil
}

// emptyTmpfs is a detached, empty, read-only tmpfs.
func emptyTmpfs() (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	for _, o := range [][2]string{{"mode", "0555"}, {"size", "4k"}, {"nr_inodes", "1"}} {
		if err := unix.FsconfigSetString(fs, o[0], o[1]); err != nil {
			return -1, err
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}
