package service

import (
	"time"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/spec"
)

// refusal is one line of the refusals log.
type refusal struct {
	At          time.Time `json:"at"`
	Namespace   string    `json:"namespace"`
	ContainerID string    `json:"container_id"`
	Reason      string    `json:"reason"`
	Message     string    `json:"message"`
}

// recordFacts is the trusted facts admission matched selectors against,
// as admission.json records them.
func recordFacts(f admission.Facts) spec.AdmissionFacts {
	return spec.AdmissionFacts{ContainerdNamespace: f.ContainerdNamespace, Runtime: f.Runtime, K8sNamespace: f.K8sNamespace}
}
