package specpolicy

import (
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// isCgroupBind: a bind of source src (on filesystem fs, as bindFS named
// it; recursive with submounts subs) exposes a cgroup filesystem: its
// source is on one, is under /sys/fs/cgroup, or carries one along.
func isCgroupBind(src, fs string, recursive bool, subs []string) bool {
	switch {
	case fs == "cgroup" || fs == "cgroup2" || under(src, "/sys/fs/cgroup"):
		return true
	case !recursive:
		return false
	}
	return under("/sys/fs/cgroup", src) || slices.Contains(subs, "cgroup") || slices.Contains(subs, "cgroup2")
}

// checkCgroupBind refuses mounts[i], a bind of a cgroup filesystem (i < 0:
// none), unless the host's cgroup2 is mounted with nsdelegate or the
// container's seccomp profile answers clone3 with ENOSYS.
//
// Why: clone3(CLONE_INTO_CGROUP) takes a directory fd of the target cgroup
// and checks write access to cgroup.procs of the common ancestor through
// kernfs, not through the mount the fd came from: a read-only bind does
// not stop it, and uid 0 owns those files. Only nsdelegate makes a cgroup
// namespace a boundary (the kernel then refuses a target outside the
// namespace's root). A bind exposes the host's hierarchy from its source
// down, so its fd names an ancestor of the container's cgroup (the source
// /sys/fs/cgroup/unified: the host's root), and a child born there is out
// of the cgroup the network table binds and the drain kills.
//
// A mount of type cgroup or cgroup2 is not a bind and stays admitted:
// runc mounts it inside the container's own cgroup namespace (the shim
// adds one, the OCI hook refuses a container without one), so its root is
// the container's own cgroup, and no ancestor can be named through it
// (on a cgroup v2 host a fresh cgroup2 mount, or runc's fallback bind of
// the container's own cgroup path; on a hybrid host runc mounts the v1
// hierarchies only, and clone3 refuses a v1 fd with EBADF). It is
// read-only unless privileged (writable_kernel_mount refuses that).
func checkCgroupBind(s *specs.Spec, i int, op Operator) error {
	if i < 0 || op.CgroupNsDelegate || op.Clone3ENOSYS {
		return nil
	}
	if s.Linux != nil && (SeccompRefusesClone3(s.Linux.Seccomp) || hostRootUnmapped(s.Linux)) {
		return nil
	}
	return refuse(RuleCgroupBind, fmt.Sprintf("mounts[%d]", i),
		"the spec binds %s, a cgroup filesystem, and this host's cgroup2 is mounted without nsdelegate: through a directory fd of it clone3(CLONE_INTO_CGROUP) starts a process in an ancestor cgroup, out of the one the network table binds, read-only mount and cgroup namespace notwithstanding; drop the bind (a mount of type cgroup, which runc makes inside the container's cgroup namespace, is admitted), have the operator mount cgroup2 with nsdelegate, or run the container with a seccomp profile whose only clone3 rule is SCMP_ACT_ERRNO with errnoRet ENOSYS (38)",
		s.Mounts[i].Source)
}

// hostRootUnmapped: the container has a user namespace that maps no id to
// host uid 0. Its processes then own no host cgroup's cgroup.procs (root's,
// 0644; runc delegates only the container's own cgroup to its root), so
// clone3 cannot start a child in an ancestor cgroup whatever fd it holds:
// CRI's read-only rbind of /sys for a user-namespaced pod stays admitted.
func hostRootUnmapped(l *specs.Linux) bool {
	userns := false
	for _, ns := range l.Namespaces {
		if ns.Type == specs.UserNamespace {
			userns = true
		}
	}
	if !userns || len(l.UIDMappings) == 0 {
		return false
	}
	for _, m := range l.UIDMappings {
		if m.Size == 0 || m.HostID == 0 || uint64(m.HostID)+uint64(m.Size) <= uint64(m.HostID) {
			return false
		}
	}
	return true
}

// SeccompRefusesClone3 reports whether profile p answers every clone3
// with ENOSYS, read conservatively: exactly one rule names clone3, with
// action SCMP_ACT_ERRNO, errnoRet ENOSYS and no argument condition; or no
// rule names it and the default action is SCMP_ACT_ERRNO with
// defaultErrnoRet ENOSYS. libc then falls back to clone(2), which has no
// CLONE_INTO_CGROUP.
func SeccompRefusesClone3(p *specs.LinuxSeccomp) bool {
	if p == nil {
		return false
	}
	enosys := func(a specs.LinuxSeccompAction, ret *uint) bool {
		return a == specs.ActErrno && ret != nil && *ret == uint(unix.ENOSYS)
	}
	var rules []specs.LinuxSyscall
	for _, sc := range p.Syscalls {
		if slices.Contains(sc.Names, "clone3") {
			rules = append(rules, sc)
		}
	}
	switch len(rules) {
	case 0:
		return enosys(p.DefaultAction, p.DefaultErrnoRet)
	case 1:
		return enosys(rules[0].Action, rules[0].ErrnoRet) && len(rules[0].Args) == 0
	}
	return false
}
