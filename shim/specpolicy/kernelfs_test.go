package specpolicy

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestKernelFSDestinations: proc only at /proc, sysfs only at /sys, even
// read-only; the defaults (any spelling of the home) are admitted.
func TestKernelFSDestinations(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    specs.Mount
		rule string
	}{
		{"proc_p2_ro", specs.Mount{Destination: "/p2", Type: "proc", Source: "proc", Options: []string{"ro"}}, RuleKernelFSDestination},
		{"sysfs_s2_ro", specs.Mount{Destination: "/s2", Type: "sysfs", Source: "sysfs", Options: []string{"ro", "nosuid"}}, RuleKernelFSDestination},
		{"proc_under_proc", specs.Mount{Destination: "/proc/1/root/x", Type: "proc", Source: "proc", Options: []string{"ro"}}, RuleKernelFSDestination},
		{"sysfs_p2_rw", specs.Mount{Destination: "/s2", Type: "sysfs", Source: "sysfs"}, RuleWritableKernelMount},
		{"proc_home_unclean", specs.Mount{Destination: "/proc/", Type: "proc", Source: "proc"}, ""},
		{"sysfs_home", specs.Mount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"ro"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ctrDefaultSpec(t)
			s.Mounts = append(s.Mounts, tc.m)
			_, err := CheckSpec(s, Grants{}, Operator{})
			field := ""
			if tc.rule != "" {
				field = "mounts[7]"
			}
			checkRule(t, "create", err, tc.rule, field)
		})
	}
}
