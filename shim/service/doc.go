// Package service is the gensee task service: it wraps containerd's stock
// runc task service (task API v3) and adds the boundary around each
// container — admission at Create, the cgroup-scoped network table installed
// and read back before any image code runs, the contract deadline, and the
// exit path that records counters and removes the table.
//
// Event-ordering rules (every handler below keeps them):
//
//  1. Create: admission runs before anything is mounted or created; a refusal
//     returns PermissionDenied and leaves nothing behind. After the inner
//     Create returns, the init is blocked in `runc init`; the network table
//     is installed and read back then, before Create is answered. Any failure
//     kills and deletes the inner task.
//  2. Start (init): the exit watcher is armed before the inner Start, so an
//     instant exit cannot slip past it. Execs pass through: they join the
//     container's cgroup and are bound by the same table.
//  3. Init exit: the inner Wait returns (execs drained); finalize runs
//     (counters, records), then the table is removed, then `done` closes.
//     The init's TaskExit event is held until `done`.
//  4. Wait (init) answers only after `done`; Delete (init) waits for `done`
//     when the task was started, then deletes the inner task and removes
//     whatever is left (a created-only task is never finalized).
//
// The package must never run image code itself, never accept a key or a
// catalog from a caller, and never let an annotation skip admission.
package service
