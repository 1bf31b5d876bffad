package specpolicy

import (
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// schedPolicies are the scheduling policies a process may ask for: the
// ones an unprivileged process may set itself. runc applies
// process.scheduler as root, so SCHED_FIFO, SCHED_RR and SCHED_DEADLINE
// (realtime: a spinning workload starves the host's CPUs) would be granted
// whatever the capability sets say.
var schedPolicies = []specs.LinuxSchedulerPolicy{specs.SchedOther, specs.SchedBatch, specs.SchedIdle}

// ioClasses are the I/O priority classes a process may ask for
// (IOPRIO_CLASS_RT, which runc would set as root, starves the host's I/O).
var ioClasses = []specs.IOPriorityClass{specs.IOPRIO_CLASS_BE, specs.IOPRIO_CLASS_IDLE}

// checkProcessPowers refuses the process fields runc applies as host root
// beyond what the process could do itself: a realtime scheduling policy or
// a negative nice value, the realtime I/O class, and an oom_score_adj below
// floor (a process the OOM killer spares while the host's die). field is
// the process's JSON path ("process" at Create, "exec process" at Exec).
func checkProcessPowers(p *specs.Process, field string, floor int) error {
	if p == nil {
		return nil
	}
	if sc := p.Scheduler; sc != nil {
		if !slices.Contains(schedPolicies, sc.Policy) {
			return refuse(RuleSchedulerPolicy, field+".scheduler.policy",
				"the spec asks for scheduling policy %q, which runc sets as root (a realtime policy starves the host's CPUs); use SCHED_OTHER, SCHED_BATCH or SCHED_IDLE, or drop %s.scheduler", sc.Policy, field)
		}
		if sc.Nice < 0 || sc.Priority != 0 {
			return refuse(RuleSchedulerPolicy, field+".scheduler",
				"the spec asks for nice %d and priority %d, which runc sets as root; use a nice value of 0 or more and priority 0, or drop %s.scheduler", sc.Nice, sc.Priority, field)
		}
	}
	if io := p.IOPriority; io != nil && !slices.Contains(ioClasses, io.Class) {
		return refuse(RuleIOPriority, field+".ioPriority.class",
			"the spec asks for I/O class %q, which runc sets as root (the realtime class starves the host's I/O); use IOPRIO_CLASS_BE or IOPRIO_CLASS_IDLE, or drop %s.ioPriority", io.Class, field)
	}
	if a := p.OOMScoreAdj; a != nil && *a < floor {
		return refuse(RuleOOMScoreAdj, field+".oomScoreAdj",
			"the spec asks for oom_score_adj %d, below %d (the runtime's own, or 0), so the OOM killer would spare the workload and kill the host's processes; use %d or more (containerd's CRI: restrict_oom_score_adj = true)", *a, floor, floor)
	}
	return nil
}

// checkNetDevices refuses linux.netDevices: runc moves a host interface
// into the container's network namespace, and a veth end, cni0 or a vxlan
// device dies with that namespace.
func checkNetDevices(l *specs.Linux) error {
	if l == nil {
		return nil
	}
	for name := range l.NetDevices {
		return refuse(RuleNetDevice, fmt.Sprintf("linux.netDevices[%q]", name),
			"the spec moves host interface %q into the container, out of the host (a veth end, bridge or vxlan device is destroyed with the container's network namespace) and past the table; drop linux.netDevices and give the container its network through CNI or a veth the host keeps", name)
	}
	return nil
}
