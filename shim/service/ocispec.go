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
// is left to refuseHostCgroupns.
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

// refuseHostCgroupns refuses a cgroup namespace joined by path that is
// the host's own (the shim's), together with a cgroup mount.
func refuseHostCgroupns(s *specs.Spec) error {
	if s.Linux == nil || !mountsCgroupfs(s) {
		return nil
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type != specs.CgroupNamespace || ns.Path == "" {
			continue
		}
		f, err := openNamespace(ns.Path, unix.CLONE_NEWCGROUP)
		if err != nil {
			return refuse("host_cgroupns", "linux.namespaces cgroup path %q: %v", ns.Path, err)
		}
		got, err := nsIDOf(f)
		f.Close()
		if err != nil {
			return refuse("host_cgroupns", "linux.namespaces cgroup path %q: %v", ns.Path, err)
		}
		self, err := os.Open("/proc/self/ns/cgroup")
		if err != nil {
			return refuse("host_cgroupns", "read own cgroup namespace: %v", err)
		}
		want, err := nsIDOf(self)
		self.Close()
		if err != nil || got == want {
			return refuse("host_cgroupns", "linux.namespaces cgroup path %q is the host's cgroup namespace and the spec mounts cgroupfs: the workload would see every host cgroup; drop the cgroup namespace path", ns.Path)
		}
	}
	return nil
}

// operatorPolicy is the part of the operator config spec admission reads.
func operatorPolicy(hooks []string, stateDir string) specpolicy.Operator {
	return specpolicy.Operator{HookAllowlist: hooks, StateDirs: []string{stateDir}}
}
