package service

import (
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/hostfacts"
	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// checkRootfs admits the task's rootfs mounts (the client's, through
// WithRootFS, or containerd's snapshot) before anything mounts them
// (startEarlyMount): only containerd's overlayfs and native snapshots under
// the operator's containerd_root, or BuildKit's bind of an overlay of them
// (specpolicy.CheckRootfs). Run after hardenRootfs, whose forced overlay
// options it admits.
func checkRootfs(r *taskAPI.CreateTaskRequest, cfg config.Config) *spec.Refusal {
	if len(r.Rootfs) == 0 {
		return nil
	}
	ms := make([]specpolicy.RootfsMount, 0, len(r.Rootfs))
	for _, m := range r.Rootfs {
		ms = append(ms, specpolicy.RootfsMount{Type: m.Type, Source: m.Source, Target: m.Target, Options: m.Options})
	}
	return refusal(specpolicy.CheckRootfs(ms, cfg.ContainerdRoot, &hostfacts.RootfsHost{}), specpolicy.RuleRootfsMount)
}
