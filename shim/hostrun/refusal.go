package hostrun

import (
	"fmt"
	"strings"

	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/spec"
)

// Refusal is the admission refusal every front door returns: here, a host
// run refused before the command started, with the reason code (the
// admission's, or one of this package's), the input that failed as its
// Field (a flag or fact: "--workspace", "--observation", "argv[0]"), what
// failed and the fix. Nothing of the run is left when one is returned.
type Refusal = spec.Refusal

// refuse makes a host run's refusal. Its message names the field, so the
// one line the command prints does: "FIELD: " starts it unless it names
// the field already.
func refuse(reason, field, fix, format string, args ...any) *Refusal {
	return named(&spec.Refusal{Reason: reason, Message: fmt.Sprintf(format, args...), Fix: fix}, field)
}

// named gives rf (refuse's, or the engine's) field as its Field when it has
// none, and makes its message name the field as refuse's do.
func named(rf *Refusal, field string) *Refusal {
	if rf.Field == "" {
		rf.Field = field
	}
	if rf.Field != "" && !strings.Contains(rf.Message, rf.Field) {
		rf.Message = rf.Field + ": " + rf.Message
	}
	return rf
}

// Reasons of refusals this front door adds to the admission's.
const (
	ReasonNotRoot             = "not_root"
	ReasonOperatorConfig      = "operator_config"
	ReasonTrustAnchor         = engine.ReasonTrustAnchor
	ReasonCatalog             = engine.ReasonCatalog
	ReasonWorkspace           = "workspace"
	ReasonCommand             = "command"
	ReasonEnv                 = "env"
	ReasonUser                = "user"
	ReasonObservationMismatch = "observation_mismatch"
	ReasonInference           = "inference"
	ReasonCgroup              = "cgroup2"
	ReasonNetwork             = "network_boundary"
	ReasonWrapper             = "wrapper"
)
