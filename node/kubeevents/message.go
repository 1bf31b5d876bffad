package kubeevents

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gensee/gensee/node/records"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/spec"
)

// Event reasons, one per kind of record posted.
const (
	ReasonAdmissionRefused = "GenseeAdmissionRefused"
	ReasonGateFailed       = "GenseeGateFailed"
	ReasonControlDefeat    = "GenseeControlDefeat"
	ReasonEgressDenied     = "GenseeEgressDenied"
)

// maxMessage bounds a message (the apiserver refuses a note over 1 KiB).
const maxMessage = 1000

// Posting is one Event to post: on which pod, why, what.
type Posting struct {
	Pod     *corev1.ObjectReference
	Reason  string
	Message string
}

// For is the Event a record makes, if any: only records of a pod (a CRI
// container) that are refusals, failed gates, findings, or, when egress,
// egress denials.
func For(r records.Record, egress bool) (Posting, bool) {
	switch r := r.(type) {
	case records.Refusal:
		// Each part redacted on its own: Redact also cuts to 300
		// characters, which must not cost the fix.
		rf := spec.Refusal{Reason: r.Reason, Message: events.Redact(r.Message), Fix: events.Redact(r.Fix)}
		return posting(r.Kubernetes, ReasonAdmissionRefused, fmt.Sprintf("gensee refused %s: %s",
			container(r.Kubernetes), rf.Text()))
	case records.Gate:
		if r.Verdict != spec.VerdictFail {
			return Posting{}, false
		}
		return posting(r.Op.Pod, ReasonGateFailed, fmt.Sprintf("gensee gate failed for %s (contract %s): %s; nothing of the failed products was staged: gensee manifest show --operation %s",
			container(r.Op.Pod), r.Op.Contract, gateSummary(r), r.Op.ID))
	case records.Finding:
		return posting(r.Op.Pod, ReasonControlDefeat, fmt.Sprintf("gensee finding %s for %s (contract %s): %s; look at it, then clear it: gensee attention list",
			r.Finding.Signature, container(r.Op.Pod), r.Op.Contract, events.Redact(r.Finding.Detail)))
	case records.EgressDenied:
		if !egress {
			return Posting{}, false
		}
		return posting(r.Op.Pod, ReasonEgressDenied, fmt.Sprintf("gensee denied egress of %s to %s (contract %s allows no such connection): gensee events --operation %s",
			container(r.Op.Pod), orDash(events.Redact(r.Event.Target)), r.Op.Contract, r.Op.ID))
	}
	return Posting{}, false
}

// posting addresses message (its parts redacted by the caller) at the pod
// of k, cut to maxMessage.
func posting(k *spec.KubernetesRef, reason, message string) (Posting, bool) {
	if k == nil || k.Namespace == "" || k.Pod == "" {
		return Posting{}, false
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: k.Namespace, Name: k.Pod, UID: types.UID(k.PodUID)}
	if k.Container != "" {
		ref.FieldPath = "spec.containers{" + k.Container + "}"
	}
	return Posting{Pod: ref, Reason: reason, Message: truncate(message, maxMessage)}, true
}

// container names the container in a message.
func container(k *spec.KubernetesRef) string {
	if k == nil || k.Container == "" {
		return "the pod's sandbox"
	}
	return "container " + k.Container
}

// gateSummary lists the failed classes and the first violations.
func gateSummary(g records.Gate) string {
	var parts []string
	for _, c := range g.Classes {
		if c.Verdict == spec.VerdictFail {
			parts = append(parts, c.Class+" failed")
		}
	}
	for i, v := range g.Violations {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more violations", len(g.Violations)-3))
			break
		}
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s %s: %s", events.Redact(v.Slot), events.Redact(v.Rule), events.Redact(v.Detail))))
	}
	if len(parts) == 0 {
		return "the gate failed"
	}
	return strings.Join(parts, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// truncate cuts s to at most n bytes on a rune boundary, "..." included.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return spec.Truncate(s, n-3)
}
