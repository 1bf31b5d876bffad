// Package notify runs the operator's notify_command when a boundary
// control fails (a control_defeat finding), for every front door: the
// containerd shim, OCI hooks and `gensee boundary run`.
//
// The command gets the finding as one JSON object on stdin (Payload) and
// in GENSEE_* environment variables. It is guidance, not boundary: it never
// blocks the monitor that raised the finding, its failure is only logged,
// and it never changes a decision or an exit status. It is bounded in time
// (its process group is killed at the deadline) and in number (at most
// MaxInFlight per process; past that a notification is dropped and logged),
// so a burst of findings cannot fork-bomb the node.
package notify
