package specpolicy

import (
	"fmt"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
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

// Never is the list of capabilities no contract can grant (spec.NeverGranted
// says why each is there): each lets the workload defeat its network boundary,
// the seccomp/LSM confinement around it, or the records of it.
var Never = spec.NeverGranted

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

func checkName(c, field, who string) *spec.Refusal {
	if spec.KnownCapability(c) {
		return nil
	}
	hint := "use a canonical upper-case CAP_ name"
	if u := strings.ToUpper(c); spec.KnownCapability(u) {
		hint = "write it as " + u
	} else if spec.KnownCapability("CAP_" + u) {
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
