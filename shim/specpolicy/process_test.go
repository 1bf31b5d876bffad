package specpolicy

import (
	"errors"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
)

// TestProcessPowers: what runc applies as root beyond the process's own
// reach is refused at Create and at Exec with the same rule and field;
// what a process could set itself is admitted.
func TestProcessPowers(t *testing.T) {
	minus := func(v int) *int { return &v }
	for _, tc := range []struct {
		name   string
		mutate func(p *specs.Process)
		floor  int
		rule   string // "" admitted
		field  string
	}{
		{"fifo", func(p *specs.Process) { p.Scheduler = &specs.Scheduler{Policy: specs.SchedFIFO, Priority: 50} }, 0, RuleSchedulerPolicy, "process.scheduler.policy"},
		{"rr", func(p *specs.Process) { p.Scheduler = &specs.Scheduler{Policy: specs.SchedRR, Priority: 1} }, 0, RuleSchedulerPolicy, "process.scheduler.policy"},
		{"deadline", func(p *specs.Process) {
			p.Scheduler = &specs.Scheduler{Policy: specs.SchedDeadline, Runtime: 1e6, Deadline: 2e6, Period: 2e6}
		}, 0, RuleSchedulerPolicy, "process.scheduler.policy"},
		{"unknown_policy", func(p *specs.Process) { p.Scheduler = &specs.Scheduler{Policy: "SCHED_X"} }, 0, RuleSchedulerPolicy, "process.scheduler.policy"},
		{"negative_nice", func(p *specs.Process) { p.Scheduler = &specs.Scheduler{Policy: specs.SchedOther, Nice: -20} }, 0, RuleSchedulerPolicy, "process.scheduler"},
		{"batch", func(p *specs.Process) { p.Scheduler = &specs.Scheduler{Policy: specs.SchedBatch, Nice: 5} }, 0, "", ""},
		{"idle", func(p *specs.Process) { p.Scheduler = &specs.Scheduler{Policy: specs.SchedIdle} }, 0, "", ""},
		{"io_rt", func(p *specs.Process) { p.IOPriority = &specs.LinuxIOPriority{Class: specs.IOPRIO_CLASS_RT} }, 0, RuleIOPriority, "process.ioPriority.class"},
		{"io_be", func(p *specs.Process) {
			p.IOPriority = &specs.LinuxIOPriority{Class: specs.IOPRIO_CLASS_BE, Priority: 0}
		}, 0, "", ""},
		{"io_idle", func(p *specs.Process) { p.IOPriority = &specs.LinuxIOPriority{Class: specs.IOPRIO_CLASS_IDLE} }, 0, "", ""},
		{"oom_negative", func(p *specs.Process) { p.OOMScoreAdj = minus(-1000) }, 0, RuleOOMScoreAdj, "process.oomScoreAdj"},
		{"oom_below_runtime", func(p *specs.Process) { p.OOMScoreAdj = minus(-999) }, -998, RuleOOMScoreAdj, "process.oomScoreAdj"},
		{"oom_runtime_own", func(p *specs.Process) { p.OOMScoreAdj = minus(-998) }, -998, "", ""}, // CRI's pause under a systemd containerd
		{"oom_positive", func(p *specs.Process) { p.OOMScoreAdj = minus(1000) }, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ctrDefaultSpec(t)
			tc.mutate(s.Process)
			_, err := CheckSpec(s, Grants{}, Operator{OOMScoreAdjFloor: tc.floor})
			checkRule(t, "create", err, tc.rule, tc.field)
			p := ctrDefaultSpec(t).Process
			tc.mutate(p)
			_, err = CheckProcess(p, Grants{}, Operator{OOMScoreAdjFloor: tc.floor})
			checkRule(t, "exec", err, tc.rule, tc.field)
		})
	}
}

// TestNetDevicesRefused: linux.netDevices moves a host interface away.
func TestNetDevicesRefused(t *testing.T) {
	s := ctrDefaultSpec(t)
	s.Linux.NetDevices = map[string]specs.LinuxNetDevice{"cni0": {Name: "eth1"}}
	_, err := CheckSpec(s, Grants{}, Operator{})
	checkRule(t, "create", err, RuleNetDevice, `linux.netDevices["cni0"]`)
}

// checkRule fails unless err is a refusal with rule at field ("" rule:
// err must be nil).
func checkRule(t *testing.T, at string, err error, rule, field string) {
	t.Helper()
	if rule == "" {
		if err != nil {
			t.Fatalf("%s: refused: %v", at, err)
		}
		return
	}
	var r *spec.Refusal
	if !errors.As(err, &r) || r.Reason != rule || r.Field != field {
		t.Fatalf("%s: got %v (%+v), want %s at %s", at, err, r, rule, field)
	}
}
