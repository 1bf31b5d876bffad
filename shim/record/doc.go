// Package record owns the runtime's durable records under the state
// directory: one directory per operation (<state>/operations/<opid>/), an
// index from containerd namespace and container id to the operation id, and
// the log of admission refusals (which have no operation).
//
// Records outlive the bundle (containerd deletes it with the task). Every
// file is written atomically (temp file, fsync, rename, directory fsync) and
// no path component is taken from a caller without validation; the cleaned
// marker alone skips the fsyncs (ReplaceFile: losing it to a crash of the
// machine only keeps the record for retention to see again), and so does
// the history index (<state>/history/<command digest>.jsonl, the newest
// manifests per command digest a node analyzer is told of): a hint whose
// lost tail costs an analyzer some history, never a record.
package record
