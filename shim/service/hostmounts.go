package service

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/hostfacts"
	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// boundSource is a bind source as admission checked it: the mount's
// destination and the identity of the inode its resolved source named.
type boundSource struct {
	index    int
	dest     string
	dev, ino uint64
}

func isBind(m specs.Mount) bool {
	return m.Type == "bind" || m.Type == "rbind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")
}

// resolveBindSources replaces every bind source with the path its
// symlinks resolve to on the host, so spec admission checks the tree
// mount(2) will bind, not a name that points elsewhere (a symlink to
// /run/containerd or to a cgroup2 mount), and records each source's
// inode for verifyBinds. A relative source is left to spec admission
// (which refuses it: runc would resolve it through the image's files); a
// source that does not resolve is refused: runc could only bind it if it
// appeared later, unchecked.
func resolveBindSources(s *specs.Spec) ([]boundSource, *spec.Refusal) {
	var out []boundSource
	for i := range s.Mounts {
		m := &s.Mounts[i]
		if !isBind(*m) || !filepath.IsAbs(m.Source) {
			continue
		}
		r, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return nil, spec.Refuse("bind_source", fmt.Sprintf("mounts[%d].source", i), "bind an existing host path", "mounts[%d].source %s: %v", i, m.Source, err)
		}
		var st unix.Stat_t
		if err := unix.Stat(r, &st); err != nil {
			return nil, spec.Refuse("bind_source", fmt.Sprintf("mounts[%d].source", i), "bind an existing host path", "mounts[%d].source %s: %v", i, r, err)
		}
		m.Source = r
		out = append(out, boundSource{index: i, dest: m.Destination, dev: st.Dev, ino: st.Ino})
	}
	return out, nil
}

// verifyBinds checks, once runc has set up the container (the init is
// blocked in runc init, its mounts in place), that every bind visible at
// its destination is the inode admission checked: a source path swapped
// between the check and runc's mount (a symlink planted by whoever can
// write a parent directory) would otherwise bind something unchecked.
// Destinations are resolved inside the container's root, never outside.
func verifyBinds(pid int, spec *specs.Spec, binds []boundSource) error {
	if len(binds) == 0 {
		return nil
	}
	root, err := os.OpenFile(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the root of init %d: %w", pid, err)
	}
	defer root.Close()
	for _, b := range binds {
		if hiddenByLater(spec.Mounts, b.index) {
			continue
		}
		fd, err := fsafe.Openat2(int(root.Fd()), b.dest, unix.O_PATH, fsafe.ResolveInRoot)
		if err != nil {
			return fmt.Errorf("bind mounts[%d] at %s: %w", b.index, b.dest, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("bind mounts[%d] at %s: %w", b.index, b.dest, err)
		}
		if st.Dev != b.dev || st.Ino != b.ino {
			return fmt.Errorf("bind mounts[%d] at %s is not the source admission checked (%s changed between the check and runc's mount)", b.index, b.dest, spec.Mounts[b.index].Source)
		}
	}
	return nil
}

// hiddenByLater reports whether a later mount covers mount i's destination.
func hiddenByLater(ms []specs.Mount, i int) bool {
	d := filepath.Clean("/" + ms[i].Destination)
	for _, m := range ms[i+1:] {
		l := filepath.Clean("/" + m.Destination)
		if l == d || l == "/" || strings.HasPrefix(d, l+"/") {
			return true
		}
	}
	return false
}

// hostPolicy is the operator policy plus the host facts spec admission
// asks for (shim/hostfacts, shared with the OCI hooks adapter).
func hostPolicy(cfg config.Config) specpolicy.Operator { return hostfacts.Operator(cfg) }
