package inner

import (
	"slices"
	"testing"

	"github.com/moby/sys/mountinfo"
)

// TestKernelMounts: kernel file systems outside the replaced trees are
// picked, parents first; the run's own /proc and /dev, /run, the private
// tmpfs trees, cgroup v1 under /sys/fs/cgroup and other types are not.
func TestKernelMounts(t *testing.T) {
	ms := []*mountinfo.Info{
		{Mountpoint: "/", FSType: "ext4"},
		{Mountpoint: "/proc", FSType: "proc"},
		{Mountpoint: "/proc/sys/fs/binfmt_misc", FSType: "binfmt_misc"},
		{Mountpoint: "/dev/pts", FSType: "devpts"},
		{Mountpoint: "/dev/mqueue", FSType: "mqueue"},
		{Mountpoint: "/run/netns/a", FSType: "nsfs"},
		{Mountpoint: "/tmp/x/proc", FSType: "proc"},
		{Mountpoint: "/sys", FSType: "sysfs"},
		{Mountpoint: "/sys/fs/cgroup/cpu", FSType: "cgroup"},
		{Mountpoint: "/sys/kernel/debug/tracing", FSType: "tracefs"},
		{Mountpoint: "/sys/kernel/debug", FSType: "debugfs"},
		{Mountpoint: "/srv/chroot/proc", FSType: "proc", Major: 0, Minor: 22},
		{Mountpoint: "/srv/chroot/dev/pts", FSType: "devpts"},
		{Mountpoint: "/srv/chroot/sys/fs/cgroup", FSType: "cgroup"},
		{Mountpoint: "/home/u/fuse", FSType: "fuse.sshfs"},
		{Mountpoint: "/sys/fs/bpf", FSType: "bpf"},
	}
	var got []string
	for _, m := range kernelMounts(ms, covered) {
		got = append(got, m.path+" "+m.fstype)
	}
	want := []string{"/srv/chroot/dev/pts devpts", "/srv/chroot/proc proc", "/srv/chroot/sys/fs/cgroup cgroup",
		"/sys/fs/bpf bpf", "/sys/kernel/debug debugfs", "/sys/kernel/debug/tracing tracefs"}
	if !slices.Equal(got, want) {
		t.Errorf("kernelMounts =\n%q\nwant\n%q", got, want)
	}
	for _, m := range kernelMounts(ms, covered) {
		if m.path == "/srv/chroot/proc" && m.dev != 22 {
			t.Errorf("dev of 0:22 = %d", m.dev)
		}
	}
}
