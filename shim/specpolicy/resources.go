package specpolicy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// CheckResources admits cgroup resources, at Create (linux.resources) and
// at every Update (ctr task update, CRI UpdateContainerResources): limits
// only narrow, but runc writes linux.resources.unified keys verbatim into
// the container's cgroup directory, and the cgroup core's own files there
// (cgroup.type, cgroup.subtree_control, cgroup.procs, cgroup.kill, ...)
// change how the cgroup, and so the table bound to it, behaves. Controller
// files (memory.max, pids.max, ...) are admitted; device rules only as
// checkDevices allows (runc's update leaves devices alone).
func CheckResources(r *specs.LinuxResources, field string) error {
	if r == nil {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(r.Unified)) {
		if strings.HasPrefix(k, "cgroup.") || !strings.Contains(k, ".") || strings.Contains(k, "/") {
			return refuse(RuleCgroupUnified, fmt.Sprintf("%s.unified[%q]", field, k),
				"the spec writes %s in the container's cgroup, a cgroup core file (or not a controller file) that changes how the cgroup the network table is bound to behaves; set only controller limits such as memory.max", k)
		}
	}
	return nil
}
