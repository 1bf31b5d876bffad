// Package metrics counts a node's gensee records (node/records) as
// Prometheus metrics with client_golang: admissions and refusals by
// selector and reason, egress denials by selector and contract, findings
// by signature, gate verdicts by product class, and a histogram of
// admission plus bind latency (admission.json's timing).
//
// Counters count the records the daemon read since it started (a restart
// resets them, as Prometheus expects of a counter; the reader's cursor
// keeps records from being counted twice by one process). Label values
// come from the runtime's records (catalog ids, reason codes, signature
// names): bounded sets, never a pod or container name.
//
// It only counts: it never reads the records itself, posts anything or
// writes a file.
package metrics
