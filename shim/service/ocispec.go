package service

import (
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Capabilities that would let a workload defeat its own boundary: it could
// rewrite or delete the table (NET_ADMIN), leave its cgroup or netns
// (SYS_ADMIN), or attach programs that bypass the hooks (BPF).
var refusedCaps = []string{"CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_BPF"}

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

// hardenSpec checks the capability rules and removes CAP_NET_RAW from every
// set. It returns the sets NET_RAW was removed from and where the
// container's sockets live. It never widens anything.
func hardenSpec(s *specs.Spec) (removed []string, kind netnsKind, nsPath string, err error) {
	if s.Process == nil {
		return nil, "", "", &specRefusal{"no_process", "the spec has no process; gensee only runs containers with a process"}
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
		// Root in a user namespace that owns the netns holds NET_ADMIN over
		// it, whatever the capability sets say.
		return nil, "", "", &specRefusal{"userns_owns_netns", "the container runs in its own user namespace, whose root would own network administration; run it without a user namespace under the gensee runtime"}
	}
	if c := s.Process.Capabilities; c != nil {
		sets := map[string]*[]string{
			"bounding": &c.Bounding, "effective": &c.Effective, "inheritable": &c.Inheritable,
			"permitted": &c.Permitted, "ambient": &c.Ambient,
		}
		for _, name := range []string{"bounding", "effective", "inheritable", "permitted", "ambient"} {
			set := sets[name]
			for _, bad := range refusedCaps {
				if slices.Contains(*set, bad) {
					return nil, "", "", &specRefusal{"refused_capability", fmt.Sprintf("the spec grants %s (%s set), which would let the workload defeat its network boundary; drop it (no --privileged, no --cap-add %s)", bad, name, bad)}
				}
			}
			if i := slices.Index(*set, capNetRaw); i >= 0 {
				*set = slices.Delete(slices.Clone(*set), i, i+1)
				removed = append(removed, name)
			}
		}
	}
	return removed, kind, nsPath, nil
}
