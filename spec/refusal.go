package spec

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Refusal is an admission refusal, the same through every front door:
// a stable reason code (an admission reason, a spec policy rule or a front
// door's own), the input that failed (a spec field's JSON path, a flag, a
// fact), what failed, and the fix. Nothing of the workload ran when one is
// returned. Its Error is the one sentence every door shows its caller:
//
//	gensee: admission refused: REASON: MESSAGE; FIX
//
// (docs/design.md §6).
type Refusal struct {
	Reason  string `json:"reason"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
	// Selector is the catalog selector the refused input matched, when
	// admission got that far; recorded, never part of Error.
	Selector string `json:"selector,omitempty"`
}

// RefusalPrefix starts every refusal's Error.
const RefusalPrefix = "gensee: admission refused: "

func (r *Refusal) Error() string {
	s := RefusalPrefix + r.Reason + ": " + r.Message
	if r.Fix != "" {
		s += "; " + r.Fix
	}
	return s
}

// Text is the refusal without the prefix: "REASON: MESSAGE; FIX", as the
// refusals log records it.
func (r *Refusal) Text() string {
	s := r.Reason + ": " + r.Message
	if r.Fix != "" {
		s += "; " + r.Fix
	}
	return s
}

// Refuse makes a Refusal; format and args make its Message.
func Refuse(reason, field, fix, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Field: field, Message: fmt.Sprintf(format, args...), Fix: fix}
}

// AsRefusal finds a Refusal in err's chain.
func AsRefusal(err error) (*Refusal, bool) {
	var rf *Refusal
	ok := errors.As(err, &rf)
	return rf, ok
}

// RefusalRecord is one line of refusals.jsonl: a refusal that never became
// an operation, from any front door. A door fills the fields it has a
// notion of; readers (gensee refusals, retention) decode this type.
type RefusalRecord struct {
	At          time.Time `json:"at"`
	Namespace   string    `json:"namespace"`
	ContainerID string    `json:"container_id,omitempty"`
	Runtime     string    `json:"runtime,omitempty"`
	// Engine names the container engine an OCI hook ran under.
	Engine string `json:"engine,omitempty"`
	// UID and User: the invoking user of a host run.
	UID     *uint32 `json:"uid,omitempty"`
	User    string  `json:"user,omitempty"`
	Reason  string  `json:"reason"`
	Field   string  `json:"field,omitempty"`
	Message string  `json:"message"`
	Fix     string  `json:"fix,omitempty"`
	// Selector: the selector the refused input matched, when known.
	Selector string `json:"selector,omitempty"`
	// Kubernetes: the pod CRI created the container for (the shim, in
	// CRI's namespace only).
	Kubernetes *KubernetesRef `json:"kubernetes,omitempty"`
}

// KubernetesRef names the pod and container CRI created a container for,
// from the annotations CRI sets after a pod's own (io.kubernetes.cri.
// sandbox-namespace, sandbox-name, sandbox-uid, container-name), so a pod
// cannot fake them. Recorded to address a Kubernetes Event at the pod;
// never matched by admission (its k8s_namespace fact is read apart).
type KubernetesRef struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"pod_uid,omitempty"`
	// Container is empty for the pod's sandbox (pause) container.
	Container string `json:"container,omitempty"`
}

// Record is the refusals.jsonl line for r at time at; the front door adds
// the facts it has (namespace, container, runtime, engine, user).
//
// Message and Fix are cut to MaxRefusalText characters each: a refusal
// may quote the caller's input (an env value, a path), and a line of the
// refusals log longer than its readers' bound would be skipped whole, the
// refusal hidden from Events and metrics.
func (r *Refusal) Record(at time.Time) RefusalRecord {
	return RefusalRecord{At: at.UTC(), Reason: r.Reason, Field: r.Field, Message: cutText(r.Message), Fix: cutText(r.Fix), Selector: r.Selector}
}

// MaxRefusalText bounds a recorded refusal's message and its fix, in
// characters (a refusals log line stays well under 64 KiB).
const MaxRefusalText = 4096

// cutText cuts s to MaxRefusalText characters, saying how much was cut.
func cutText(s string) string {
	if utf8.RuneCountInString(s) <= MaxRefusalText {
		return s
	}
	r := []rune(s)
	return string(r[:MaxRefusalText]) + fmt.Sprintf("... (%d more characters cut)", len(r)-MaxRefusalText)
}

// NetnsKind says where a workload's sockets live (admission.json's netns).
type NetnsKind string

const (
	NetnsPrivate NetnsKind = "private" // a netns runc made for this container alone
	NetnsPath    NetnsKind = "path"    // a netns joined by path (a pod's, CNI's, --with-ns)
	NetnsHost    NetnsKind = "host"    // the host's netns (--net-host, a host run)
)

// Shared reports whether the netns may hold other processes than the
// workload's: the table's rules then match only the bound cgroup.
func (k NetnsKind) Shared() bool { return k != NetnsPrivate }

// How the network table went at the end (NetworkEnforcement.TableRemoved).
const (
	TableDeleted   = "deleted"    // deleted by the exit path
	TableWithNetns = "with_netns" // it lived in a private netns that died with the workload
)
