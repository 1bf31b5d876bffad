// Package events owns the sink side of gensee's events: redacting an event's
// detail, appending events to an operation's events.jsonl (fsync per event,
// bounded, with a persisted dropped counter), reading and following that log
// for the CLI, the Publisher a door publishes through (the shim's maps
// events to containerd's types in shim/events/wire, which only the shim
// and gensee-events link), and the operation's attention.json.
//
// It reports; it never decides. Nothing here changes a verdict, a return
// code or a task's fate, and it must never write an event's detail or hint
// anywhere without Redact having run over it first.
package events
