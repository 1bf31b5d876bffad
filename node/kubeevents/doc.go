// Package kubeevents posts a node's gensee records (node/records) as
// Kubernetes Events on the pod they are about (involvedObject kind Pod,
// its namespace, name and uid, from CRI's annotations the runtime
// recorded): GenseeAdmissionRefused for a refusal, GenseeGateFailed for a
// failed gate, GenseeControlDefeat for a finding, and, when asked,
// GenseeEgressDenied for a denied connection. Each message says what
// happened, the record's reason and the fix or where to look.
//
// It posts with client-go's tools/record EventBroadcaster (core/v1
// Events, as the kubelet does), whose correlator deduplicates (an event
// identical to a recent one becomes a count on it) and aggregates (more
// than ten similar events in ten minutes become one "combined" event),
// and whose token bucket limits each pod and reason to a burst of 25 and
// one more every five minutes: a pod that keeps dialing out cannot drown
// its refusals or findings. events.k8s.io/v1 (tools/events) was not
// chosen: it has series but no per-object rate limit. Records older than
// MaxAge are not posted (Kubernetes keeps Events an hour by default; a
// daemon that was down does not replay stale news).
//
// Posting is best effort and asynchronous: an apiserver that is down
// costs Events (retried 12 times), never a record, a metric or a
// verdict. It never reads the records itself and never decides anything.
package kubeevents
