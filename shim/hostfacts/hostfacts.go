// Package hostfacts gives spec admission (shim/specpolicy, which is pure)
// the operator's policy and the facts it asks of this host: the filesystem a
// bind source is on and what is mounted beneath a host path. Every front
// door that admits an OCI spec (the shim, the OCI hooks adapter) builds its
// specpolicy.Operator here. It only reads the host.
package hostfacts

import (
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/specpolicy"
)

// Operator is the operator policy of cfg plus the host facts.
func Operator(cfg config.Config) specpolicy.Operator {
	op := specpolicy.Operator{HookAllowlist: cfg.HookAllowlist, StateDirs: []string{cfg.StateDir},
		WritableBindRoots: cfg.WritableBindRoots, AllowedRuntimeFiles: cfg.AllowedRuntimeFiles}
	op.FSTyper = func(p string) (int64, error) {
		var sf unix.Statfs_t
		if err := unix.Statfs(p, &sf); err != nil {
			return 0, err
		}
		return int64(sf.Type), nil
	}
	op.SocketFinder = FindSocket
	op.ReadableBindRoots = cfg.ReadableBindRoots
	op.OOMScoreAdjFloor = OOMScoreAdjFloor()
	mounts := MountTable()
	op.CgroupNsDelegate = CgroupNsDelegate(mounts)
	op.NoX32ABI = NoX32ABI()
	op.Submounts = func(p string) []string {
		var out []string
		for _, m := range mounts {
			if strings.HasPrefix(m.Mountpoint, strings.TrimSuffix(p, "/")+"/") {
				out = append(out, m.FSType)
			}
		}
		return out
	}
	return op
}

// CgroupNsDelegate reports whether the host's cgroup2 is mounted with
// nsdelegate, from mount table ms: a superblock option, so every cgroup2
// mount shows it. No cgroup2 mount (or an unread table) is false.
func CgroupNsDelegate(ms []*mountinfo.Info) bool {
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			return slices.Contains(strings.Split(m.VFSOptions, ","), "nsdelegate")
		}
	}
	return false
}

// MountTable reads this process's mount table (moby/sys/mountinfo, which
// containerd itself uses). On error it returns one entry of unknown type,
// so every recursive bind is treated as carrying submounts (fail closed).
func MountTable() []*mountinfo.Info {
	ms, err := mountinfo.GetMounts(nil)
	if err != nil {
		return []*mountinfo.Info{{Mountpoint: "/", FSType: "unknown"}}
	}
	return ms
}
