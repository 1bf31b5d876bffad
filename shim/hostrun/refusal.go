package hostrun

import "fmt"

// Refusal is a host run refused before the command started: the reason
// code (the admission's, or one of this package's), the input that failed,
// what failed and the fix. Nothing of the run is left when one is returned.
type Refusal struct {
	Reason  string // e.g. "workspace", "observation_mismatch", an admission reason
	Field   string // the flag or fact that failed: "--workspace", "--observation", "argv[0]"
	Message string // what failed
	Fix     string // what to do
}

func (r *Refusal) Error() string {
	s := fmt.Sprintf("refused (%s, %s): %s", r.Reason, r.Field, r.Message)
	if r.Fix != "" {
		s += "; " + r.Fix
	}
	return s
}

func refuse(reason, field, fix, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Field: field, Message: fmt.Sprintf(format, args...), Fix: fix}
}

// Reasons of refusals this front door adds to the admission's.
const (
	ReasonNotRoot             = "not_root"
	ReasonOperatorConfig      = "operator_config"
	ReasonTrustAnchor         = "trust_anchor"
	ReasonCatalog             = "catalog"
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
