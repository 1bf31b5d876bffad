package specpolicy

import (
	"slices"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Rule codes of an exec held to its init (CheckExecBound).
const (
	RuleExecLSM    = "exec_lsm"
	RuleExecRlimit = "exec_rlimit"
)

// InitRules are the init's process rules as Create admitted them: an exec
// into the container is held to them (CheckExecBound).
// runc exec applies an exec's own apparmorProfile, selinuxLabel and
// rlimits, not the container's: an exec without them runs unconfined by
// the LSM and with runc's (the shim's) limits.
type InitRules struct {
	ApparmorProfile string
	SelinuxLabel    string
	Rlimits         []specs.POSIXRlimit
}

// InitRulesOf copies the rules of the init's admitted process p.
func InitRulesOf(p *specs.Process) *InitRules {
	if p == nil {
		return &InitRules{}
	}
	return &InitRules{ApparmorProfile: p.ApparmorProfile, SelinuxLabel: p.SelinuxLabel, Rlimits: slices.Clone(p.Rlimits)}
}

// ExecBound is what an exec was admitted with under its init's rules, for
// the exec's admission record.
type ExecBound struct {
	ApparmorProfile string              `json:"apparmor_profile,omitempty"`
	SelinuxLabel    string              `json:"selinux_label,omitempty"`
	Rlimits         []specs.POSIXRlimit `json:"rlimits,omitempty"`
	// RlimitsFromInit are the resources the exec did not set, given the
	// init's limit (runc exec would leave it the shim's).
	RlimitsFromInit []string `json:"rlimits_from_init,omitempty"`
}

// CheckExecBound holds exec process p to the init's rules: the same
// AppArmor profile and SELinux label as the init, or refused (an exec
// under another label is outside the init's confinement, with none it is
// unconfined); each rlimit one the init sets, soft and hard each no higher
// than the init's, or refused; an init rlimit the exec leaves out is added
// with the init's values. It changes p only by those additions.
func CheckExecBound(p *specs.Process, init *InitRules) (ExecBound, error) {
	if p.ApparmorProfile != init.ApparmorProfile {
		return ExecBound{}, refuse(RuleExecLSM, "process.apparmorProfile",
			"the exec asks for AppArmor profile %q, the container's init runs under %q: an exec outside the init's profile is outside its confinement; exec with the container's own process spec (apparmorProfile %q)", p.ApparmorProfile, init.ApparmorProfile, init.ApparmorProfile)
	}
	if p.SelinuxLabel != init.SelinuxLabel {
		return ExecBound{}, refuse(RuleExecLSM, "process.selinuxLabel",
			"the exec asks for SELinux label %q, the container's init runs under %q: an exec under another label is outside the init's confinement; exec with the container's own process spec (selinuxLabel %q)", p.SelinuxLabel, init.SelinuxLabel, init.SelinuxLabel)
	}
	var b ExecBound
	seen := map[string]bool{}
	for i, r := range p.Rlimits {
		field := "process.rlimits[" + strconv.Itoa(i) + "]"
		if seen[r.Type] {
			return ExecBound{}, refuse(RuleExecRlimit, field, "the exec sets %s twice; set each resource once", r.Type)
		}
		seen[r.Type] = true
		j := slices.IndexFunc(init.Rlimits, func(l specs.POSIXRlimit) bool { return l.Type == r.Type })
		if j < 0 {
			return ExecBound{}, refuse(RuleExecRlimit, field,
				"the exec sets %s, which the container's init does not: an exec's limits are held to the init's; leave it out or give the container one", r.Type)
		}
		if l := init.Rlimits[j]; r.Soft > l.Soft || r.Hard > l.Hard {
			return ExecBound{}, refuse(RuleExecRlimit, field,
				"the exec asks for %s %d:%d (soft:hard), above the container's init's %d:%d: an exec's limits are held to the init's; ask for at most those", r.Type, r.Soft, r.Hard, l.Soft, l.Hard)
		}
	}
	for _, l := range init.Rlimits {
		if !seen[l.Type] {
			p.Rlimits = append(p.Rlimits, l)
			b.RlimitsFromInit = append(b.RlimitsFromInit, l.Type)
		}
	}
	b.ApparmorProfile, b.SelinuxLabel, b.Rlimits = p.ApparmorProfile, p.SelinuxLabel, slices.Clone(p.Rlimits)
	return b, nil
}
