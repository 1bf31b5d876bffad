package specpolicy

import (
	"errors"
	"reflect"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
)

// TestCheckExecBound checks an exec against its init's rules: the same
// LSM labels or refused; each rlimit one the init sets and no higher, or
// refused; the init's rlimits the exec leaves out added and named.
func TestCheckExecBound(t *testing.T) {
	init := &InitRules{ApparmorProfile: "cri-containerd.apparmor.d", SelinuxLabel: "system_u:system_r:container_t:s0:c1,c2",
		Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 4096}, {Type: "RLIMIT_NPROC", Soft: 100, Hard: 100}}}
	same := func() *specs.Process {
		return &specs.Process{ApparmorProfile: init.ApparmorProfile, SelinuxLabel: init.SelinuxLabel,
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 4096}, {Type: "RLIMIT_NPROC", Soft: 100, Hard: 100}}}
	}
	p := same()
	b, err := CheckExecBound(p, init)
	if err != nil || len(b.RlimitsFromInit) != 0 || !reflect.DeepEqual(b.Rlimits, init.Rlimits) || b.ApparmorProfile != init.ApparmorProfile || b.SelinuxLabel != init.SelinuxLabel {
		t.Fatalf("the init's own rules: %+v, %v", b, err)
	}
	p = same()
	p.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 10, Hard: 20}}
	b, err = CheckExecBound(p, init)
	if err != nil || !reflect.DeepEqual(b.RlimitsFromInit, []string{"RLIMIT_NPROC"}) || len(p.Rlimits) != 2 || p.Rlimits[1] != init.Rlimits[1] {
		t.Fatalf("lower limits, one left out: %+v, %v (rlimits %v)", b, err, p.Rlimits)
	}
	for name, c := range map[string]struct {
		mut         func(*specs.Process)
		rule, field string
	}{
		"no profile":  {func(p *specs.Process) { p.ApparmorProfile = "" }, RuleExecLSM, "process.apparmorProfile"},
		"unconfined":  {func(p *specs.Process) { p.ApparmorProfile = "unconfined" }, RuleExecLSM, "process.apparmorProfile"},
		"no label":    {func(p *specs.Process) { p.SelinuxLabel = "" }, RuleExecLSM, "process.selinuxLabel"},
		"spc_t":       {func(p *specs.Process) { p.SelinuxLabel = "system_u:system_r:spc_t:s0" }, RuleExecLSM, "process.selinuxLabel"},
		"higher hard": {func(p *specs.Process) { p.Rlimits[0].Hard = 1 << 20 }, RuleExecRlimit, "process.rlimits[0]"},
		"higher soft": {func(p *specs.Process) { p.Rlimits[1].Soft = 101 }, RuleExecRlimit, "process.rlimits[1]"},
		"not the init's": {func(p *specs.Process) {
			p.Rlimits = append(p.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Soft: 1, Hard: 1})
		}, RuleExecRlimit, "process.rlimits[2]"},
		"the same, twice": {func(p *specs.Process) {
			p.Rlimits = append(p.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Soft: 1, Hard: 1})
		}, RuleExecRlimit, "process.rlimits[2]"},
	} {
		p := same()
		c.mut(p)
		var rf *spec.Refusal
		if _, err := CheckExecBound(p, init); !errors.As(err, &rf) || rf.Reason != c.rule || rf.Field != c.field {
			t.Errorf("%s: %v, want %s at %s", name, err, c.rule, c.field)
		}
	}
	// An init with no labels and no rlimits: an exec with none is admitted
	// as it is, one that asks for any is refused.
	if _, err := CheckExecBound(&specs.Process{}, InitRulesOf(&specs.Process{})); err != nil {
		t.Errorf("no rules on either side: %v", err)
	}
	if _, err := CheckExecBound(&specs.Process{ApparmorProfile: "x"}, InitRulesOf(nil)); err == nil {
		t.Error("a profile the init does not run under was admitted")
	}
}
