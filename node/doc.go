// Package node is gensee's node daemon (cmd/gensee-node): it follows the
// runtime's records under the state directory (node/records), counts them
// as Prometheus metrics served on an HTTP endpoint (node/metrics) and,
// when asked, posts Kubernetes Events on the pods they are about
// (node/kubeevents).
//
// It lives apart from the shim and the CLI. Shims are short-lived (one
// per container, gone at Delete) and a refusal has no shim left to post
// anything, so the poster is a daemon that reads what every front door
// already writes; and the gensee CLI stays free of client-go and
// client_golang, whose package initialisation would slow every
// `gensee boundary run`.
//
// Ordering: a poll's records go to the metrics, then to the poster, and
// only then is the reader's cursor committed. A crash in between repeats
// that poll's records after the restart (at least once); a committed
// record is never handed out again.
//
// It must never write under the state directory, never change a verdict,
// and never block the runtime: everything it does is after the fact.
package node
