package admission

import (
	"fmt"
	"time"

	"github.com/gensee/gensee/spec"
)

// Annotation keys a caller may set; both are untrusted input.
const (
	AnnotationInference   = "io.gensee.boundary.inference"
	AnnotationObservation = "io.gensee.boundary.observation"
)

// Facts are what the runtime itself knows about the caller; never from
// annotations.
type Facts struct {
	ContainerdNamespace string
	Runtime             string // runtime handler, e.g. io.containerd.gensee.v2
	K8sNamespace        string // set by CRI for pods; empty otherwise
	// User is the invoking user of a host command (gensee boundary run);
	// nil for containers, so a selector's user key matches none of them.
	User *User
}

// User is the invoking user as the runtime found it: the real uid (or
// sudo's SUDO_UID when that is 0) and its login name, "" when the password
// database has none.
type User struct {
	UID  uint32
	Name string
}

// Input is everything a decision depends on.
type Input struct {
	Catalog              *spec.Catalog // verified by shim/trust
	CatalogVersion       uint64
	Facts                Facts
	InferenceEnvelope    []byte           // annotation io.gensee.boundary.inference; may be empty
	PreflightObservation []byte           // annotation io.gensee.boundary.observation; may be empty
	Observation          spec.Observation // re-derived by the runtime (shim/observe)
	// Command is what Observation.CommandDigest covers, as the bundle has
	// it; needed when the selector lists volatile_env (stabilize).
	Command spec.Command
	Now     time.Time
	// Ask asks the selector's node analyzer (nil: none is asked). Decide
	// calls it only when no inference is attached, the selector names an
	// analyzer, and the observation is complete.
	Ask Asker
}

// Asker asks the analyzer sel names about the stable observation obs
// (digest obsDigest) of command cmd, within sel's timeout. It returns the
// answer's inference envelope (nil when there is none) and the record of
// the request; a consult that is not answered carries why in Outcome.
type Asker func(sel *spec.Selector, obs spec.Observation, obsDigest string, cmd spec.Command) ([]byte, spec.AnalyzerConsult)

// InferenceSummary describes an inference whose signature verified against
// the catalog's analyzer key (nil in a Decision otherwise).
type InferenceSummary = spec.AdmittedInference

// Decision is the outcome. Admitted implies Contract, ContractID and
// ContractDigest are set; otherwise Reason and Message say why not.
type Decision struct {
	Admitted          bool           `json:"admitted"`
	Contract          *spec.Contract `json:"-"` // a copy; its slices are the catalog's: read only
	ContractID        string         `json:"contract_id,omitempty"`
	ContractDigest    string         `json:"contract_digest,omitempty"`
	SafeDefault       bool           `json:"safe_default"`
	Selector          string         `json:"selector,omitempty"`
	CatalogVersion    uint64         `json:"catalog_version"`
	ObservationDigest string         `json:"observation_digest,omitempty"` // the re-derived one
	// Observation is the observation decided on: the re-derived one with
	// the selector's volatile env left out of its command digest.
	Observation  spec.Observation      `json:"-"`
	Analyzer     *spec.AnalyzerConsult `json:"analyzer,omitempty"`
	Inference    *InferenceSummary     `json:"inference,omitempty"`
	Reason       Reason                `json:"reason"`
	Message      string                `json:"message"` // "<reason>: <what failed>; <fix>"
	FallbackFrom Reason                `json:"fallback_from,omitempty"`
	// what failed and the fix of a refusal, apart (Refusal).
	what, fix string
}

// Refusal is a refused decision as every front door returns it: its
// reason, what failed and the fix; nil when the decision admitted.
func (d Decision) Refusal() *spec.Refusal {
	if d.Admitted {
		return nil
	}
	if d.what == "" { // not made by refuse
		return &spec.Refusal{Reason: string(d.Reason), Message: d.Message, Selector: d.Selector}
	}
	return &spec.Refusal{Reason: string(d.Reason), Message: d.what, Fix: d.fix, Selector: d.Selector}
}

// Decide admits the container under exactly one approved contract of the
// catalog, or refuses it. See the package doc for the order of checks and
// the safe_default policy.
func Decide(in Input) Decision {
	d := Decision{CatalogVersion: in.CatalogVersion}
	cat := in.Catalog
	if cat == nil {
		return refuse(d, fail(ReasonNoCatalog, "no verified catalog is loaded",
			"install a signed catalog and its trust anchor (gensee catalog keygen, gensee catalog sign)"))
	}
	if !in.Now.Before(cat.ExpiresAt) {
		return refuse(d, fail(ReasonCatalogExpired, fmt.Sprintf("catalog version %d expired at %s", cat.Version, stamp(cat.ExpiresAt)),
			"publish a newer catalog version"))
	}
	sel, f := selectorFor(cat, in.Facts)
	if f != nil {
		return refuse(d, f)
	}
	d.Selector = sel.ID
	var cmd spec.Command // what d.Observation's command digest covers
	if d.Observation, cmd, f = stabilize(in.Observation, in.Command, sel.VolatileEnv); f != nil {
		return refuse(d, f)
	}
	// The observation matters only to check an inference or a preflight;
	// without either, a safe_default does not depend on it.
	d.ObservationDigest, f = observationDigest(d.Observation)
	if f != nil && (len(in.InferenceEnvelope) > 0 || len(in.PreflightObservation) > 0) {
		return refuse(d, f)
	}
	if f = checkPreflight(in.PreflightObservation, d.Observation, d.ObservationDigest); f != nil {
		return refuse(d, f)
	}
	if len(in.InferenceEnvelope) == 0 && sel.Analyzer != nil && in.Ask != nil {
		in.InferenceEnvelope, d.Analyzer = consult(in.Ask, sel, d.Observation, d.ObservationDigest, cmd)
	}
	class, summary, f := evaluate(in, sel, d.ObservationDigest, d.Analyzer)
	d.Inference = summary
	if f == nil {
		id := sel.Routes[class]
		d, f = admit(d, cat, id)
		if f == nil {
			d.Reason = ReasonAdmitted
			d.Message = fmt.Sprintf("admitted: class %q (%d bp, margin %d bp) from analyzer %s routes selector %q to contract %q",
				class, summary.ConfidenceBP, summary.MarginBP, summary.Analyzer, sel.ID, id)
			return d
		}
	}
	if d.Analyzer != nil && d.Analyzer.Outcome == spec.ConsultAnswered && f.reason != ReasonUnrouted {
		// the analyzer's inference verified, but the catalog routes it nowhere
		d.Analyzer.Outcome, d.Analyzer.Detail = spec.ConsultRejected, string(f.reason)
	}
	// A caller's annotation that fails an integrity check refuses; the
	// analyzer's answer, which the runtime asked for, is "no inference".
	if !(f.reason.Fallback() || d.Analyzer != nil) || sel.SafeDefault == "" {
		return refuse(d, f)
	}
	fb, err := admit(d, cat, sel.SafeDefault)
	if err != nil {
		return refuse(d, err)
	}
	fb.SafeDefault, fb.FallbackFrom, fb.Reason = true, f.reason, ReasonSafeDefault
	fb.Message = fmt.Sprintf("safe_default: %s: %s; admitted with selector %q's safe_default contract %q",
		f.reason, f.what, sel.ID, sel.SafeDefault)
	return fb
}

// admit sets the contract id, and a copy of the contract with its digest.
func admit(d Decision, cat *spec.Catalog, id string) (Decision, *failure) {
	c, digest, ok, err := cat.ContractDigest(id)
	if !ok || id == "" {
		return d, fail(ReasonUnrouted, fmt.Sprintf("selector %q names contract %q, which catalog version %d does not contain", d.Selector, id, cat.Version),
			"fix and re-sign the catalog (it should not have validated)")
	}
	if err != nil {
		return d, fail(ReasonInternal, fmt.Sprintf("digest of contract %q: %v", id, err), "report this bug")
	}
	d.Admitted, d.Contract, d.ContractID, d.ContractDigest = true, &c, id, digest
	return d, nil
}

func refuse(d Decision, f *failure) Decision {
	d.Admitted, d.Contract, d.ContractID, d.ContractDigest, d.SafeDefault = false, nil, "", "", false
	d.Reason, d.Message, d.FallbackFrom = f.reason, f.message(), ""
	d.what, d.fix = f.what, f.fix
	return d
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
