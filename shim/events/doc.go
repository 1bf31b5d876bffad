// Package events owns the sink side of gensee's events: redacting an event's
// detail, appending events to an operation's events.jsonl (fsync per event,
// bounded, with a persisted dropped counter), reading and following that log
// for the CLI, mapping an event to and from the containerd event type that
// `ctr events` prints, and the operation's attention.json.
//
// It reports; it never decides. Nothing here changes a verdict, a return
// code or a task's fate, and it must never write an event's detail or hint
// anywhere without Redact having run over it first.
package events
