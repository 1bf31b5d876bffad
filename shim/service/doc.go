// Package service is the gensee task service: it wraps containerd's stock
// runc task service (task API v3) and adds the boundary around each
// container — admission at Create, the cgroup-scoped network table installed
// and read back before any image code runs, the contract deadline, and the
// exit path that records counters and removes the table.
//
// Event-ordering rules (every handler below keeps them):
//
//  1. Create: admission runs before runc creates anything; the shim mounts
//     the task's snapshot where runc runs it and observes the executable
//     there (the inner Create mounts nothing), and a refusal returns
//     PermissionDenied and unmounts it. Without an inference, a preflight
//     observation or spec hooks, the executable's hash is taken while runc
//     creates the task and the decision is taken again with it; it must
//     match before Create answers, and before anything is recorded. Once
//     runc has made the init (blocked in `runc init`; its pid file in the
//     bundle), or else after the inner Create, the network table is
//     installed and read back, before Create is answered. Any failure kills
//     and deletes the inner task.
//  2. Start (init): it waits for the admission record bind made durable
//     off Create's path (subject, table), and
//     refuses when that failed; the lifecycle moves created -> starting before the
//     inner Start and the TaskExit hold is armed, so an instant exit cannot
//     slip past it; a failed inner Start moves back to created. Execs are
//     admitted (exec.go), then join the container's cgroup and are bound by
//     the same table; their exits are never held.
//  3. Init exit: the init's pidfd says it exited (only where it is pid 1 of
//     its own pid namespace, whose processes the kernel has ended then) or
//     the inner Wait returns (execs drained), whichever comes first; the
//     exit pipeline (pipeline.go) runs the gate helper's start-up beside
//     the drain, then the gate beside the counters, denied attempts and
//     table removal, then the fsynced manifest beside the gate's events,
//     and last the release that closes `done`. The init's TaskExit is held
//     until then; Delete also waits for the inner Wait's answer.
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
