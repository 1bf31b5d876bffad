package specpolicy

import (
	"path"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// requiredMasked and requiredReadonly are the /proc and /sys paths both containerd
// (v2.4.2 pkg/oci populateDefaultUnixSpec) and the kubelet (pkg/securitycontext
// defaultMaskedPaths / defaultReadonlyPaths, which CRI containers receive) hide. CRI
// empties containerd's lists and applies the kubelet's, so the kubelet's are the common
// floor: containerd's extra /proc/interrupts and thermal_throttle masks are not required.
var requiredMasked = []string{
	"/proc/acpi",
	"/proc/asound",
	"/proc/kcore",
	"/proc/keys",
	"/proc/latency_stats",
	"/proc/timer_list",
	"/proc/timer_stats",
	"/proc/sched_debug",
	"/proc/scsi",
	"/sys/firmware",
	"/sys/devices/virtual/powercap",
}

var requiredReadonly = []string{
	"/proc/bus",
	"/proc/fs",
	"/proc/irq",
	"/proc/sys",
	"/proc/sysrq-trigger",
}

func checkProcPaths(l *specs.Linux) error {
	var masked, ro []string
	if l != nil {
		masked, ro = l.MaskedPaths, l.ReadonlyPaths
	}
	for _, p := range requiredMasked {
		if !covered(p, masked) {
			return refuse(RuleUnmaskedProc, "linux.maskedPaths",
				"the spec does not mask %s, which containerd and the kubelet hide from every container; keep the default masked paths (no procMount: Unmasked, no --privileged)", p)
		}
	}
	for _, p := range requiredReadonly {
		// masking is stricter than read-only, so either list covers it
		if !covered(p, ro) && !covered(p, masked) {
			return refuse(RuleUnmaskedProc, "linux.readonlyPaths",
				"the spec does not make %s read-only, which containerd and the kubelet do for every container; keep the default read-only paths (no procMount: Unmasked, no --privileged)", p)
		}
	}
	return nil
}

// covered reports whether p or one of its parents is in list.
func covered(p string, list []string) bool {
	for _, e := range list {
		e = path.Clean(e)
		if e == p || strings.HasPrefix(p, e+"/") {
			return true
		}
	}
	return false
}
