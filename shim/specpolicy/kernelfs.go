package specpolicy

import (
	"fmt"
	"path"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// kernelFSHome is where a procfs or sysfs mount may go: the only places
// linux.maskedPaths and linux.readonlyPaths cover. A second procfs at /p2
// would show /proc/kcore, /proc/sysrq-trigger and /proc/sys unmasked and
// writable through the mount's own options.
var kernelFSHome = map[string]string{"proc": "/proc", "sysfs": "/sys"}

// checkKernelFSDestinations refuses a proc or sysfs mount anywhere but its
// home. It runs after checkMounts, whose writable_kernel_mount names a
// writable one first.
func checkKernelFSDestinations(mounts []specs.Mount) error {
	for i, m := range mounts {
		home, ok := kernelFSHome[m.Type]
		if !ok || path.Clean(m.Destination) == home {
			continue
		}
		return refuse(RuleKernelFSDestination, fmt.Sprintf("mounts[%d]", i),
			"the spec mounts %s at %s, where the masked and read-only paths (which cover %s only) do not reach; mount it at %s only, or drop it", m.Type, m.Destination, home, home)
	}
	return nil
}
