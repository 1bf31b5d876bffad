package hooks

import (
	"context"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Refusal is the admission refusal every front door returns. Its Error is
// the sentence the hook prints on stderr, which the engine shows (podman:
// "error running hook #0: ..., stderr: gensee: admission refused: ...").
type Refusal = spec.Refusal

// refuse makes a refusal of this door without a spec field (spec.Refuse
// takes one).
func refuse(rule, fix, format string, args ...any) *Refusal {
	return spec.Refuse(rule, "", fix, format, args...)
}

// Reasons this front door adds to the admission's and the spec policy's.
const (
	ReasonOperatorConfig = "operator_config"
	ReasonObservation    = "observation"
	ReasonEntrypoint     = "entrypoint_mount"
	ReasonCapNetRaw      = "cap_net_raw"
	ReasonSpecNarrowed   = "spec_narrowed"
	ReasonNamespacePath  = "namespace_path"
	ReasonCgroupns       = "host_cgroupns"
	ReasonNetns          = "netns_foreign_userns"
	ReasonNetnsInUse     = "netns_in_use"
	ReasonUserns         = "user_namespace"
	ReasonBindSource     = "bind_source"
	ReasonRootPath       = "root_path"
	ReasonNetwork        = "network_boundary"
	// ReasonRootfsReused: the upperdir holds more than a baseline can
	// record (a container restarted after its earlier runs wrote much).
	ReasonRootfsReused = "rootfs_reused"
)

// refused appends rf to the refusals log and returns it.
func refused(ctx context.Context, st record.Store, s State, rf *Refusal) *Refusal {
	log.G(ctx).WithField("container_id", s.ID).WithField("reason", rf.Reason).Warn(rf.Error())
	if st.Dir == "" {
		return rf
	}
	rec := rf.Record(time.Now())
	rec.Namespace, rec.ContainerID, rec.Runtime, rec.Engine = Namespace, s.ID, Runtime, EngineOf(s.Annotations)
	if err := st.AppendRefusal(rec); err != nil {
		log.G(ctx).WithError(err).Error("record admission refusal")
	}
	return rf
}
