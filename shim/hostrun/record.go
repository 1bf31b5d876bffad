package hostrun

import (
	"time"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/spec"
)

// Namespace is the record namespace host runs are indexed under: a host
// run is findable as --namespace host --container <operation id>, or by
// --operation.
const Namespace = "host"

// admissionRecord is admission.json of a host run: why this contract
// governs this command, and who the command is.
type admissionRecord struct {
	OperationID string      `json:"operation_id"`
	Namespace   string      `json:"namespace"`
	ContainerID string      `json:"container_id"` // the operation id: the index key
	CreatedAt   time.Time   `json:"created_at"`
	Facts       factsRecord `json:"facts"`
	admission.Recorded
	Command  commandRecord `json:"command"`
	Netns    string        `json:"netns"` // always "host"
	Table    string        `json:"table,omitempty"`
	Subject  *spec.Subject `json:"subject,omitempty"`
	Deadline string        `json:"deadline,omitempty"`
}

type factsRecord struct {
	Runtime string `json:"runtime"`
	User    string `json:"user,omitempty"`
	UID     uint32 `json:"uid"`
}

// commandRecord is what the command digest covers, plus where it ran.
type commandRecord struct {
	Args       []string `json:"args"`
	Env        []string `json:"env"`
	Cwd        string   `json:"cwd"`
	Executable string   `json:"executable"` // the path argv[0] resolved to
	Workspace  string   `json:"workspace"`
}

// refusal is one line of the refusals log for a host run.
type refusal struct {
	At        time.Time `json:"at"`
	Namespace string    `json:"namespace"` // "host"
	Runtime   string    `json:"runtime"`
	UID       uint32    `json:"uid"`
	User      string    `json:"user,omitempty"`
	Reason    string    `json:"reason"`
	Field     string    `json:"field"`
	Message   string    `json:"message"`
}
