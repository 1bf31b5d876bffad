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
//  2. Start (init): it waits for the admission record bind made durable
//     off Create's path (subject, table, capability_removed event), and
//     refuses when that failed; the lifecycle moves created -> starting before the
//     inner Start and the TaskExit hold is armed, so an instant exit cannot
//     slip past it; a failed inner Start moves back to created. Execs are
//     admitted (exec.go), then join the container's cgroup and are bound by
//     the same table; their exits are never held.
//  3. Init exit: the inner Wait returns (execs drained); the exit pipeline
//     (pipeline.go) runs gate helper start-up and drain, gate, counters and
//     denied attempts, table removal, the fsynced manifest, and last the
//     release that closes `done`. The init's TaskExit is held until then.
//  4. Wait (init) answers only after `done`; Delete (init) waits for `done`
//     and for the held TaskExit to go out when the task was started, is
//     refused while it is starting, then deletes the inner task; a task
//     that never started gets the network half of the pipeline and a
//     manifest saying the gate did not run.
//
// An operation is three parts: its lifecycle (operation.go: typed states,
// refusals worded as containerd's), its network boundary (boundary.go:
// netns, table, monitor, removal, under a lock of its own) and its exit
// pipeline, whose steps are small interfaces the shim wires to the real
// drain, gate helper, boundary, record store and publisher hold, and the
// tests to fakes (pipeline_test.go).
//
// The package must never run image code itself, never accept a key or a
// catalog from a caller, and never let an annotation skip admission.
package service
