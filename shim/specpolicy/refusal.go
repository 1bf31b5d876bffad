package specpolicy

import (
	"fmt"

	"github.com/gensee/gensee/spec"
)

// refuse makes a spec policy refusal (a *spec.Refusal, the one every front
// door returns): rule is a stable snake_case code, field the JSON path of
// the offending spec field, and the message one operator-facing sentence
// that says what to do. The message starts with the field, so the one line
// a door shows names it too.
func refuse(rule, field, format string, args ...any) *spec.Refusal {
	return &spec.Refusal{Reason: rule, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// Rule codes. They are part of the records and of the wiring: never rename one.
const (
	RuleRefusedCapability   = "refused_capability"
	RuleCapabilityNotGrant  = "capability_not_granted"
	RuleUnknownCapability   = "unknown_capability"
	RuleSpecHook            = "spec_hook"
	RuleDevice              = "device"
	RuleWritableKernelMount = "writable_kernel_mount"
	RuleMountType           = "mount_type"
	RuleRuntimeSocket       = "runtime_socket"
	RuleUnmaskedProc        = "unmasked_proc"
	RuleHostCgroupns        = "host_cgroupns"
	RuleHostPID             = "host_pid"
	RuleHostIPC             = "host_ipc"
	RuleSysctl              = "sysctl"
	RuleSeccompProfile      = "seccomp_profile"
	RuleNoSpec              = "no_spec"
	RuleCgroupUnified       = "cgroup_unified"
	RuleWritableHostPath    = "writable_host_path"
	RuleRootPath            = "root_path"
	RuleBindSocket          = "bind_socket"
	RuleMountPropagation    = "mount_propagation"
	RuleNetDevice           = "net_device"
	RuleSchedulerPolicy     = "scheduler_policy"
	RuleIOPriority          = "io_priority"
	RuleOOMScoreAdj         = "oom_score_adj"
	RuleKernelFSDestination = "kernel_fs_destination"
	// RuleKernelFSExposed: procfs (a bind of the host's /proc, read-only
	// or not: /proc/<pid>/root is a magic link out of any bind), debugfs,
	// tracefs, securityfs or bpffs in the container, mounted or bound.
	RuleKernelFSExposed = "kernel_fs_exposed"
	RuleCgroupBind      = "cgroup_bind"
	RuleRootfsMount     = "rootfs_mount"
)
