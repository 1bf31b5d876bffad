package service

import (
	"slices"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/specpolicy"
)

// runtimeStateDirs are the never-bindable directories of the runtime a
// task's Create comes from beyond specpolicy's stock ones (/var/lib/containerd,
// /run/containerd): the operator's state_dir, containerd's actual root (the
// operator's containerd_root: k3s's /var/lib/rancher/k3s/agent/containerd,
// RKE2's) and its actual state, derived from the task's bundle path
// (<state>/io.containerd.runtime.v2.task/<ns>/<id>; k3s's
// /run/k3s/containerd). Every container's snapshots, bundles and sockets
// lie there: a read-only bind of the k3s root shows them all. CRI's own
// sandbox files for the container's pod stay admitted (specpolicy checks
// them first).
func runtimeStateDirs(cfg config.Config, bundle, ns, id string) []string {
	dirs := []string{cfg.StateDir}
	for _, d := range []string{cfg.ContainerdRoot, specpolicy.StateFromBundle(bundle, ns, id)} {
		if d != "" && d != "/" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
