package specpolicy

import (
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

type devNum struct {
	major int64
	minor int64 // -1: any minor
}

// defaultNodes are the device nodes runc creates in every container anyway
// (libcontainer/specconv AllowedDevices with a path); a spec may repeat them.
var defaultNodes = map[string]devNum{
	"/dev/null":    {1, 3},
	"/dev/zero":    {1, 5},
	"/dev/full":    {1, 7},
	"/dev/random":  {1, 8},
	"/dev/urandom": {1, 9},
	"/dev/tty":     {5, 0},
}

// defaultAllows are containerd v2.4.2's oci.WithDefaultUnixDevices allow rules (what
// `ctr run` adds); CRI adds none. Every one is type c, access rwm.
var defaultAllows = []devNum{
	{1, 3}, {1, 8}, {1, 7}, {5, 0}, {1, 5}, {1, 9}, {5, 1}, {136, -1}, {5, 2},
}

func checkDevices(l *specs.Linux) error {
	if l == nil {
		return nil
	}
	for i, d := range l.Devices {
		want, ok := defaultNodes[d.Path]
		if ok && d.Type == "c" && d.Major == want.major && d.Minor == want.minor {
			continue
		}
		return refuse(RuleDevice, fmt.Sprintf("linux.devices[%d]", i),
			"the spec creates device %s (%s %d:%d), which is not one of the devices every container gets; remove it (no --device, no --privileged)", d.Path, d.Type, d.Major, d.Minor)
	}
	if l.Resources == nil {
		return nil
	}
	for i, r := range l.Resources.Devices {
		if !r.Allow || allowIsDefault(r) {
			continue // a deny only narrows
		}
		return refuse(RuleDevice, fmt.Sprintf("linux.resources.devices[%d]", i),
			"the spec's device cgroup allows %s, wider than containerd's default device rules; remove the rule (no --privileged, no --device)", describeRule(r))
	}
	return nil
}

func allowIsDefault(r specs.LinuxDeviceCgroup) bool {
	if r.Type != "c" || r.Major == nil || strings.Trim(r.Access, "rwm") != "" {
		return false
	}
	minor := int64(-1)
	if r.Minor != nil {
		minor = *r.Minor
	}
	for _, d := range defaultAllows {
		if d.major == *r.Major && (d.minor == minor || (d.minor == -1 && minor >= 0)) {
			return true
		}
	}
	return false
}

func describeRule(r specs.LinuxDeviceCgroup) string {
	num := func(p *int64) string {
		if p == nil {
			return "*"
		}
		return fmt.Sprint(*p)
	}
	t := r.Type
	if t == "" {
		t = "a"
	}
	return fmt.Sprintf("%q %s:%s %s", t, num(r.Major), num(r.Minor), r.Access)
}
