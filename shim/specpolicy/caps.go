package specpolicy

import (
	"fmt"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

const capNetRaw = "CAP_NET_RAW"

// Default is containerd's default capability set (v2.4.2 pkg/oci defaultUnixCaps) minus
// CAP_NET_RAW. It is also what PSS baseline allows without a grant.
var Default = []string{
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_FSETID",
	"CAP_FOWNER",
	"CAP_MKNOD",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_SETFCAP",
	"CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT",
	"CAP_KILL",
	"CAP_AUDIT_WRITE",
}

// Never is the list of capabilities no contract can grant: each lets the workload defeat
// its network boundary, the seccomp/LSM confinement around it, or the records of it.
// The first twelve are DESIGN.md §5's list; the rest are of the same class:
//   - CAP_MAC_OVERRIDE: overrides the MAC policy (AppArmor/SELinux/Smack) confining it.
//   - CAP_SYSLOG: reads and clears the host-global kernel log and unhides kernel
//     addresses (kptr_restrict), the first step of a kernel exploit.
//   - CAP_CHECKPOINT_RESTORE: chooses pids (ns_last_pid, clone3 set_tid) and opens
//     /proc/pid/map_files; pid reuse defeats the watchdog's process identity.
//   - CAP_AUDIT_CONTROL, CAP_AUDIT_READ: the audit subsystem is host-global (not
//     namespaced); control disables host audit rules, read streams every host event.
//
// CAP_SYS_RESOURCE, CAP_SYS_NICE, CAP_IPC_LOCK and similar only move resource limits or
// scheduling inside the container's own cgroup and namespaces: grantable by contract.
var Never = []string{
	"CAP_NET_ADMIN",
	"CAP_SYS_ADMIN",
	"CAP_BPF",
	"CAP_SYS_MODULE",
	"CAP_SYS_RAWIO",
	"CAP_SYS_PTRACE",
	"CAP_SYS_TIME",
	"CAP_DAC_READ_SEARCH",
	"CAP_SYS_BOOT",
	"CAP_MAC_ADMIN",
	"CAP_PERFMON",
	"CAP_NET_RAW",
	"CAP_MAC_OVERRIDE",
	"CAP_SYSLOG",
	"CAP_CHECKPOINT_RESTORE",
	"CAP_AUDIT_CONTROL",
	"CAP_AUDIT_READ",
}

// known is every capability Linux defines (include/uapi/linux/capability.h, up to
// CAP_LAST_CAP = CAP_CHECKPOINT_RESTORE). A name outside it is refused: runc would
// ignore or reject it, and we cannot say what it grants.
var known = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
	"CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
	"CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// CheckGrants validates a contract's capability grants: canonical known names, none in
// Never. Granting a Default capability is harmless and accepted.
func CheckGrants(caps []string) error {
	for i, c := range caps {
		field := fmt.Sprintf("capabilities[%d]", i)
		if err := checkName(c, field, "the contract"); err != nil {
			return err
		}
		if slices.Contains(Never, c) {
			return refuse(RuleRefusedCapability, field,
				"the contract grants %s, which would let the workload defeat its boundary; remove it from the contract's capabilities", c)
		}
	}
	return nil
}

func checkName(c, field, who string) *Refusal {
	if slices.Contains(known, c) {
		return nil
	}
	hint := "use a canonical upper-case CAP_ name"
	if u := strings.ToUpper(c); slices.Contains(known, u) {
		hint = "write it as " + u
	} else if slices.Contains(known, "CAP_"+u) {
		hint = "write it as CAP_" + u
	}
	return refuse(RuleUnknownCapability, field,
		"%s names capability %q, which is not a Linux capability name; %s", who, c, hint)
}

type capSet struct {
	name string
	caps *[]string
}

func capSets(c *specs.LinuxCapabilities) []capSet {
	return []capSet{
		{"bounding", &c.Bounding},
		{"effective", &c.Effective},
		{"inheritable", &c.Inheritable},
		{"permitted", &c.Permitted},
		{"ambient", &c.Ambient},
	}
}

// checkCaps refuses any capability outside Default ∪ grants (CAP_NET_RAW excepted: it
// is removed, not refused). It does not modify p.
func checkCaps(p *specs.Process, g Grants) error {
	if p == nil || p.Capabilities == nil {
		return nil
	}
	if err := CheckGrants(g.Capabilities); err != nil {
		return err
	}
	for _, set := range capSets(p.Capabilities) {
		for i, c := range *set.caps {
			field := fmt.Sprintf("process.capabilities.%s[%d]", set.name, i)
			if err := checkName(c, field, "the spec"); err != nil {
				return err
			}
			switch {
			case c == capNetRaw:
				// removed by dropNetRaw
			case slices.Contains(Never, c):
				return refuse(RuleRefusedCapability, field,
					"the spec grants %s (%s set), which would let the workload defeat its boundary; drop it (no --privileged, no --cap-add %s)", c, set.name, c)
			case slices.Contains(Default, c), slices.Contains(g.Capabilities, c):
			default:
				return refuse(RuleCapabilityNotGrant, field,
					"the spec grants %s (%s set), which is not in the default set and not granted by the contract; drop it, or have the catalog's contract grant it in capabilities", c, set.name)
			}
		}
	}
	return nil
}

// dropNetRaw removes every occurrence of CAP_NET_RAW from every set of p and reports
// one "CAP_NET_RAW (set)" per set it was removed from.
func dropNetRaw(p *specs.Process) []string {
	if p == nil || p.Capabilities == nil {
		return nil
	}
	var removed []string
	for _, set := range capSets(p.Capabilities) {
		n := len(*set.caps)
		*set.caps = slices.DeleteFunc(*set.caps, func(c string) bool { return c == capNetRaw })
		if len(*set.caps) != n {
			removed = append(removed, capNetRaw+" ("+set.name+")")
		}
	}
	return removed
}
