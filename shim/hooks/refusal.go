package hooks

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/record"
)

// Refusal is an admission refusal: the rule, what was refused (with the
// spec field) and the fix. Its Error is the sentence the hook prints on
// stderr, which the engine shows (podman: "error running hook #0: ...,
// stderr: gensee: admission refused: ...").
type Refusal struct {
	Rule    string
	Message string // what, with the spec field
	Fix     string
}

func (r *Refusal) Error() string {
	s := "gensee: admission refused: " + r.Rule + ": " + r.Message
	if r.Fix != "" {
		s += "; " + r.Fix
	}
	return s
}

func refuse(rule, fix, format string, args ...any) *Refusal {
	return &Refusal{Rule: rule, Message: fmt.Sprintf(format, args...), Fix: fix}
}

// Reasons this front door adds to the admission's and the spec policy's.
const (
	ReasonOperatorConfig = "operator_config"
	ReasonTrustAnchor    = "trust_anchor"
	ReasonCatalog        = "catalog"
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
)

// refusalLine is one line of refusals.jsonl for this front door.
type refusalLine struct {
	At          time.Time `json:"at"`
	Namespace   string    `json:"namespace"` // "oci-hooks"
	ContainerID string    `json:"container_id"`
	Runtime     string    `json:"runtime"`
	Engine      string    `json:"engine,omitempty"`
	Reason      string    `json:"reason"`
	Message     string    `json:"message"`
}

// refused appends rf to the refusals log and returns it.
func refused(ctx context.Context, st record.Store, s State, rf *Refusal) *Refusal {
	log.G(ctx).WithField("container_id", s.ID).WithField("reason", rf.Rule).Warn(rf.Error())
	if st.Dir == "" {
		return rf
	}
	if err := st.AppendRefusal(refusalLine{At: time.Now().UTC(), Namespace: Namespace, ContainerID: s.ID,
		Runtime: Runtime, Engine: EngineOf(s.Annotations), Reason: rf.Rule, Message: rf.Error()}); err != nil {
		log.G(ctx).WithError(err).Error("record admission refusal")
	}
	return rf
}
