package specpolicy

import (
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
)

// Namespaces is what a spec's linux.namespaces say, read the same way for
// every front door: where the workload's sockets live, whether it has a
// user or a cgroup namespace, and every namespace it joins by path, in
// spec order. Reading refuses nothing: each door applies its own rules to
// it (the shim admits a pod's user namespace, the OCI hooks none).
type Namespaces struct {
	// Netns is NetnsHost when the spec lists no network namespace,
	// NetnsPath when it joins one by path (NetnsPath), else NetnsPrivate.
	Netns     spec.NetnsKind
	NetnsPath string
	// User: the spec lists a user namespace, joined by UserPath ("" when
	// runc makes one).
	User     bool
	UserPath string
	// Cgroup: the spec lists a cgroup namespace, joined by CgroupPath (""
	// when runc makes one).
	Cgroup     bool
	CgroupPath string
	// Joined are the entries with a path, in spec order.
	Joined []JoinedNamespace
}

// JoinedNamespace is a namespace the spec joins by path.
type JoinedNamespace struct {
	Index int // in linux.namespaces
	specs.LinuxNamespace
}

// Field is the entry's path as a refusal names it.
func (j JoinedNamespace) Field() string { return fmt.Sprintf("linux.namespaces[%d].path", j.Index) }

// ReadNamespaces reads s's linux.namespaces. Where a type is listed twice
// (runc refuses such a spec), the last entry says.
func ReadNamespaces(s *specs.Spec) Namespaces {
	n := Namespaces{Netns: spec.NetnsHost}
	if s.Linux == nil {
		return n
	}
	for i, ns := range s.Linux.Namespaces {
		switch ns.Type {
		case specs.NetworkNamespace:
			n.Netns, n.NetnsPath = spec.NetnsPrivate, ns.Path
			if ns.Path != "" {
				n.Netns = spec.NetnsPath
			}
		case specs.UserNamespace:
			n.User, n.UserPath = true, ns.Path
		case specs.CgroupNamespace:
			n.Cgroup, n.CgroupPath = true, ns.Path
		}
		if ns.Path != "" {
			n.Joined = append(n.Joined, JoinedNamespace{Index: i, LinuxNamespace: ns})
		}
	}
	return n
}

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
