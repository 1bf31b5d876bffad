package service

import (
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// capNetRaw opens AF_PACKET sockets, which bypass the inet hooks.
const capNetRaw = "CAP_NET_RAW"

// netnsKind says where a container's sockets live.
type netnsKind = spec.NetnsKind

const (
	netnsPrivate = spec.NetnsPrivate
	netnsPath    = spec.NetnsPath
	netnsHost    = spec.NetnsHost
)

// userns says whether and how a container has a user namespace.
type userns struct {
	has  bool   // the spec lists a user namespace
	path string // joined by path (a pod's), "" when runc makes one
}

// namespacesOf reads where the container's sockets live and whether it has
// a user namespace. A user namespace is admitted: the capability
// allowlist holds inside it (no NET_ADMIN or SYS_ADMIN in any set, so not
// even its root can hold them over a netns it owns, and a nested user
// namespace holds capabilities only over namespaces it creates), and the
// netns checks (checkJoinedNetns, checkNetns) accept a netns owned by the
// container's own user namespace, never by a third one.
// The reading is specpolicy.ReadNamespaces, the one every door uses.
func namespacesOf(s *specs.Spec) (kind netnsKind, nsPath string, u userns, rf *spec.Refusal) {
	if s.Process == nil {
		return "", "", u, spec.Refuse("no_process", "process", "", "the spec has no process; gensee only runs containers with a process")
	}
	n := specpolicy.ReadNamespaces(s)
	return n.Netns, n.NetnsPath, userns{has: n.User, path: n.UserPath}, nil
}

// privateCgroupns gives a container that shares the host's cgroup
// namespace one of its own, rooted at its cgroup, so the cgroupfs runc
// mounts for it (type cgroup) shows its own cgroup as the root and names
// no ancestor to move to (write cgroup.procs, clone3 CLONE_INTO_CGROUP).
// The namespace is a boundary for a bind of the host's cgroupfs only
// under nsdelegate (a read-only mount does not stop clone3, which needs
// only an fd of the target directory): specpolicy refuses such a bind
// without it (cgroup_bind). ctr's default spec on a hybrid host, and
// BuildKit's, have none. It returns a note for
// the records, or "" when the spec already has one (a cgroup namespace
// joined by path is refused by refuseJoinedNamespaces).
func privateCgroupns(s *specs.Spec) string {
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.CgroupNamespace {
			return ""
		}
	}
	s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	return "linux.namespaces: a private cgroup namespace was added (the spec shared the host's), so no process of the container can move out of its cgroup"
}

// hostNamespaces are the namespace types a spec may not join by a path
// that turns out to be the host's own (this shim's): the rule that refuses
// sharing them without a path (specpolicy: host_pid, host_ipc) must not be
// side-stepped by naming /proc/1/ns/pid. The host's cgroup namespace is
// refused only together with a cgroup mount, as without a path.
var hostNamespaces = map[specs.LinuxNamespaceType]struct {
	file, rule string
	nstype     int
}{
	specs.PIDNamespace: {"pid", "host_pid", unix.CLONE_NEWPID},
	specs.IPCNamespace: {"ipc", "host_ipc", unix.CLONE_NEWIPC},
}

// refuseJoinedNamespaces checks every namespace the spec joins by path:
// a mount namespace never (runc would build the container inside another
// tree than the one observed), a cgroup namespace never (its root would
// let the container's processes move between the cgroups under it, out of
// the one the table binds), and a pid or ipc namespace only when it is not
// the host's.
func refuseJoinedNamespaces(s *specs.Spec) *spec.Refusal {
	for _, ns := range specpolicy.ReadNamespaces(s).Joined {
		switch ns.Type {
		case specs.MountNamespace:
			return refuse("mount_ns_path", "linux.namespaces mount path %q: the container would be set up in another mount namespace than the one its rootfs was observed in; drop the path", ns.Path)
		case specs.CgroupNamespace:
			return refuse("host_cgroupns", "linux.namespaces cgroup path %q: a joined cgroup namespace would let the container's processes move to other cgroups under its root, out of the one the network table binds; drop the path (the runtime gives the container its own)", ns.Path)
		}
		h, ok := hostNamespaces[ns.Type]
		if !ok {
			continue
		}
		f, err := openNamespace(ns.Path, h.nstype)
		if err != nil {
			return refuse(h.rule, "linux.namespaces %s path %q: %v", ns.Type, ns.Path, err)
		}
		got, err := nsIDOf(f)
		f.Close()
		if err != nil {
			return refuse(h.rule, "linux.namespaces %s path %q: %v", ns.Type, ns.Path, err)
		}
		self, err := os.Open("/proc/self/ns/" + h.file)
		if err != nil {
			return refuse(h.rule, "read own %s namespace: %v", h.file, err)
		}
		want, err := nsIDOf(self)
		self.Close()
		if err != nil || got == want {
			return refuse(h.rule, "linux.namespaces %s path %q is the host's own %s namespace; drop the path (a pod's container joins its sandbox's, never the host's)", ns.Type, ns.Path, h.file)
		}
	}
	return nil
}

// privatePidns reports whether runc makes the container a pid namespace
// of its own (a pid namespace without a path): then the init is its pid 1,
// and once the init has exited the kernel has ended every process in it.
func privatePidns(s *specs.Spec) bool {
	if s.Linux == nil {
		return false
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.PIDNamespace {
			return ns.Path == ""
		}
	}
	return false
}
