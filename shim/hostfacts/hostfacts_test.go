package hostfacts

import (
	"testing"

	"github.com/moby/sys/mountinfo"
)

// TestCgroupNsDelegate: nsdelegate is read from cgroup2's superblock
// options; v1 hierarchies and their options say nothing, and no cgroup2
// mount is no delegation.
func TestCgroupNsDelegate(t *testing.T) {
	v1 := &mountinfo.Info{Mountpoint: "/sys/fs/cgroup/cpu", FSType: "cgroup", VFSOptions: "rw,cpu,nsdelegate"}
	for _, tc := range []struct {
		name string
		ms   []*mountinfo.Info
		want bool
	}{
		{"hybrid_without", []*mountinfo.Info{v1, {Mountpoint: "/sys/fs/cgroup/unified", FSType: "cgroup2", VFSOptions: "rw"}}, false},
		{"unified_with", []*mountinfo.Info{{Mountpoint: "/sys/fs/cgroup", FSType: "cgroup2", VFSOptions: "rw,nsdelegate,memory_recursiveprot"}}, true},
		{"v1_only", []*mountinfo.Info{v1}, false},
		{"none", nil, false},
	} {
		if got := CgroupNsDelegate(tc.ms); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
