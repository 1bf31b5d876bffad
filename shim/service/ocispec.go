package service

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/specpolicy"
)

// capNetRaw opens AF_PACKET sockets, which bypass the inet hooks.
const capNetRaw = "CAP_NET_RAW"

// netnsKind says where a container's sockets live.
type netnsKind string

const (
	netnsPrivate netnsKind = "private" // a new netns made by runc
	netnsPath    netnsKind = "path"    // joins an existing netns (CRI pods, --with-ns)
	netnsHost    netnsKind = "host"    // the host's netns (--net-host)
)

// specRefusal is a spec that can never be admitted; it names the rule.
type specRefusal struct {
	Rule string
	Msg  string
}

func (e *specRefusal) Error() string { return e.Rule + ": " + e.Msg }

// namespacesOf reads where the container's sockets live and refuses what
// the network boundary cannot govern: no process, or a user namespace
// (whose root would hold NET_ADMIN over a netns it owns).
func namespacesOf(s *specs.Spec) (kind netnsKind, nsPath string, err error) {
	if s.Process == nil {
		return "", "", &specRefusal{"no_process", "the spec has no process; gensee only runs containers with a process"}
	}
	kind = netnsHost
	userns := false
	if s.Linux != nil {
		for _, ns := range s.Linux.Namespaces {
			switch ns.Type {
			case specs.NetworkNamespace:
				kind, nsPath = netnsPrivate, ns.Path
				if ns.Path != "" {
					kind = netnsPath
				}
			case specs.UserNamespace:
				userns = true
			}
		}
	}
	if userns {
		return "", "", &specRefusal{"userns_owns_netns", "the container runs in its own user namespace, whose root would own network administration; run it without a user namespace under the gensee runtime"}
	}
	return kind, nsPath, nil
}

// privateCgroupns narrows a spec that mounts cgroupfs in the host's cgroup
// namespace: it gives the container a cgroup namespace of its own, rooted
// at its cgroup, so the mount shows only the container's subtree. ctr's
// default spec on a hybrid host is such a spec. It returns a note for the
// records, or "" when nothing changed. A cgroup namespace joined by path
// is left to refuseJoinedNamespaces.
func privateCgroupns(s *specs.Spec) string {
	if s.Linux == nil || !mountsCgroupfs(s) {
		return ""
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.CgroupNamespace {
			return ""
		}
	}
	s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	return "linux.namespaces: a private cgroup namespace was added, because the spec mounts cgroupfs and shared the host's"
}

// mountsCgroupfs reports whether the spec mounts cgroupfs, or binds a
// host path under /sys/fs/cgroup or on a cgroup filesystem (bind sources
// already resolved by resolveBindSources).
func mountsCgroupfs(s *specs.Spec) bool {
	for _, m := range s.Mounts {
		if m.Type == "cgroup" || m.Type == "cgroup2" {
			return true
		}
		if !filepath.IsAbs(m.Source) || !(m.Type == "bind" || m.Type == "rbind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")) {
			continue
		}
		if src := filepath.Clean(m.Source); src == "/sys/fs/cgroup" || strings.HasPrefix(src, "/sys/fs/cgroup/") {
			return true
		}
		var sf unix.Statfs_t
		if unix.Statfs(m.Source, &sf) == nil && (sf.Type == unix.CGROUP2_SUPER_MAGIC || sf.Type == unix.CGROUP_SUPER_MAGIC) {
			return true
		}
	}
	return false
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
	specs.PIDNamespace:    {"pid", "host_pid", unix.CLONE_NEWPID},
	specs.IPCNamespace:    {"ipc", "host_ipc", unix.CLONE_NEWIPC},
	specs.CgroupNamespace: {"cgroup", "host_cgroupns", unix.CLONE_NEWCGROUP},
}

// refuseJoinedNamespaces checks every namespace the spec joins by path:
// a mount namespace never (runc would build the container inside another
// tree than the one observed), and a pid, ipc or (with a cgroup mount)
// cgroup namespace only when it is not the host's.
func refuseJoinedNamespaces(s *specs.Spec) error {
	if s.Linux == nil {
		return nil
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Path == "" {
			continue
		}
		if ns.Type == specs.MountNamespace {
			return refuse("mount_ns_path", "linux.namespaces mount path %q: the container would be set up in another mount namespace than the one its rootfs was observed in; drop the path", ns.Path)
		}
		h, ok := hostNamespaces[ns.Type]
		if !ok || (ns.Type == specs.CgroupNamespace && !mountsCgroupfs(s)) {
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
			return refuse(h.rule, "linux.namespaces %s path %q is the host's own %s namespace; join the pod's or another container's, or drop the path", ns.Type, ns.Path, h.file)
		}
	}
	return nil
}

// operatorPolicy is the part of the operator config spec admission reads.
func operatorPolicy(hooks []string, stateDir string) specpolicy.Operator {
	return specpolicy.Operator{HookAllowlist: hooks, StateDirs: []string{stateDir}}
}
