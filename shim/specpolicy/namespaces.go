package specpolicy

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// checkNamespaces refuses the host pid and ipc namespaces (PSS baseline: hostPID,
// hostIPC), and the host cgroup namespace when a cgroup hierarchy is mounted (the
// container would see and name the host's whole cgroup tree). containerd's default spec
// and CRI's sandbox and container specs all carry pid and ipc entries unless the pod
// asks for hostPID/hostIPC, and hostNetwork pods keep them. User and network namespaces
// are the shim's concern, and so is joining a namespace by path (the shim's
// checkJoinPaths: only a pod's own sandbox's, or an empty network namespace).
func checkNamespaces(s *specs.Spec, cgroupMount string) error {
	var ns []specs.LinuxNamespace
	if s.Linux != nil {
		ns = s.Linux.Namespaces
	}
	if !hasNS(ns, specs.PIDNamespace) {
		return refuse(RuleHostPID, "linux.namespaces",
			"the spec shares the host's pid namespace, which lets the workload see and signal host processes; add a pid namespace (no --pid host, no hostPID)")
	}
	if !hasNS(ns, specs.IPCNamespace) {
		return refuse(RuleHostIPC, "linux.namespaces",
			"the spec shares the host's ipc namespace, which lets the workload reach host shared memory and message queues; add an ipc namespace (no --ipc host, no hostIPC)")
	}
	for _, n := range ns {
		if n.Type == specs.CgroupNamespace && n.Path != "" {
			return refuse(RuleHostCgroupns, "linux.namespaces",
				"the spec joins the cgroup namespace %s; processes may move between the cgroups under a cgroup namespace's root, so the container needs one of its own: drop the path", n.Path)
		}
	}
	if cgroupMount != "" && !hasNS(ns, specs.CgroupNamespace) {
		return refuse(RuleHostCgroupns, "linux.namespaces",
			"the spec shares the host's cgroup namespace and mounts a cgroup hierarchy (%s), which exposes the host's cgroup tree; add a cgroup namespace (--cgroupns private) or drop the cgroup mount", cgroupMount)
	}
	return nil
}

func hasNS(ns []specs.LinuxNamespace, t specs.LinuxNamespaceType) bool {
	for _, n := range ns {
		if n.Type == t {
			return true
		}
	}
	return false
}
