package hostrun

import (
	"time"
)

// Namespace is the record namespace host runs are indexed under: a host
// run is findable as --namespace host --container <operation id>, or by
// --operation.
const Namespace = "host"

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
