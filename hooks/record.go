package hooks

import (
	"time"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/nsfile"
	"github.com/gensee/gensee/spec"
)

// admissionRecord is admission.json of a hook operation: why this contract
// governs this container, and who the container is.
type admissionRecord struct {
	OperationID string      `json:"operation_id"`
	Namespace   string      `json:"namespace"` // "oci-hooks"
	ContainerID string      `json:"container_id"`
	CreatedAt   time.Time   `json:"created_at"`
	Facts       factsRecord `json:"facts"`
	Engine      string      `json:"engine,omitempty"` // recorded, never matched (EngineOf)
	admission.Recorded
	// Seccomp is what the container's own profile was verified to refuse.
	Seccomp   *spec.SeccompEnforcement `json:"seccomp,omitempty"`
	Notes     []string                 `json:"notes,omitempty"`
	Bundle    string                   `json:"bundle"`
	RootPath  string                   `json:"root_path"`
	Diff      diffSource               `json:"diff"`
	Mounts    []string                 `json:"mounts,omitempty"` // mount destinations (stubs in the upperdir)
	Netns     string                   `json:"netns"`
	NetnsPath string                   `json:"netns_path,omitempty"`
	NetnsID   *nsfile.ID               `json:"netns_id,omitempty"`
	Table     string                   `json:"table,omitempty"`
	Subject   *spec.Subject            `json:"subject,omitempty"`
	Deadline  string                   `json:"deadline,omitempty"`
	// Monitor is the per-operation monitor process (pid, start time).
	Monitor *owner `json:"monitor,omitempty"`
}

type factsRecord struct {
	Runtime string `json:"runtime"`
}

// owner is a process beyond pid reuse.
type owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}
