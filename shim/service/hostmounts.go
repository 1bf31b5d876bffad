package service

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/specpolicy"
)

// resolveBindSources replaces every absolute bind source with the path
// its symlinks resolve to on the host, so spec admission checks the tree
// mount(2) will bind, not a name that points elsewhere (a symlink to
// /run/containerd or to a cgroup2 mount). A source that does not resolve
// is left as it is: runc fails on it.
func resolveBindSources(s *specs.Spec) {
	for i := range s.Mounts {
		m := &s.Mounts[i]
		bind := m.Type == "bind" || m.Type == "rbind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")
		if !bind || !filepath.IsAbs(m.Source) {
			continue
		}
		if r, err := filepath.EvalSymlinks(m.Source); err == nil {
			m.Source = r
		}
	}
}

// hostPolicy is the operator policy plus the host facts spec admission
// asks for: the filesystem a bind source is on, and what is mounted
// beneath it (an rbind carries those along).
func hostPolicy(hooks []string, stateDir string) specpolicy.Operator {
	op := operatorPolicy(hooks, stateDir)
	op.FSTyper = func(p string) (int64, error) {
		var sf unix.Statfs_t
		if err := unix.Statfs(p, &sf); err != nil {
			return 0, err
		}
		return int64(sf.Type), nil
	}
	mounts := readMountTable()
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

// readMountTable reads the shim's mount table (moby/sys/mountinfo, which
// containerd itself uses). On error it returns one entry of unknown type,
// so every recursive bind is treated as carrying submounts (fail closed).
func readMountTable() []*mountinfo.Info {
	ms, err := mountinfo.GetMounts(nil)
	if err != nil {
		return []*mountinfo.Info{{Mountpoint: "/", FSType: "unknown"}}
	}
	return ms
}
