// Package records follows a gensee state directory (docs/design.md §3
// "Records") for a node daemon and turns what the runtime wrote into typed
// records: refusals (refusals.jsonl), admissions (admission.json once
// bound), egress denials (events.jsonl), gate verdicts (manifest.json) and
// control_defeat findings (attention.json).
//
// It remembers where it was in a cursor file of its own (never under the
// state directory): the refusals log's offset with its inode and the last
// line it took, and per operation what was already reported. Poll reads
// past the cursor; Commit makes the new cursor durable (temp file, fsync,
// rename) once the caller has handed the records on, so a restart neither
// loses nor repeats a record that was committed. The refusals log is cut
// at its oldest end by retention (a rewrite under a new inode): the reader
// finds its place again by the last line it took. A line not yet ended by
// a newline is left for the next Poll.
//
// It only reads the runtime's records: it must never write, lock or
// remove anything under the state directory, and never follow a symlink
// there (fsafe).
package records
