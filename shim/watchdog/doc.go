// Package watchdog folds an operation's boundary events and reach
// observations into a trail (in memory, at most TrailCap events, timed on
// the receive clock the caller passes in; a restart forgets it; a watched
// target's first unspent denial the trail evicts is pinned, up to
// PinnedCap targets, so a flood of other events does not take it off the
// watch) and fires control-defeat signatures on evidence that a boundary
// failed:
//
//   - deny_then_reach: a target denied earlier (or watched because of a
//     policy_unbound event) is later seen reached, or answered on a flow it
//     opened (a served port's reply);
//   - table_tampered: the operation's table changed or vanished while the
//     task runs;
//   - product_mismatch: a staged product no longer matches its manifest
//     (gensee manifest verify folds what it finds into a watchdog of its
//     own and raises the attention with the result).
//
// Evidence a signature used is spent and never flags twice. A finding sets
// the operation's attention; later findings are added to it, never
// replace it. Clear and End forget them here only: the operation's record
// (shim/events, attention.json) keeps every finding after the task, and a
// person's clearing is recorded there beside it.
//
// It also emits the denial-loop guidance (hint_loop): one event per run of
// consecutive egress denials with no allowed flow in between.
//
// It is pure logic: no I/O, no clock of its own, no goroutines. It reports
// and never decides: nothing here stops a task, changes a verdict or a
// return code, and guidance is never a finding. The kernel-side sensors
// that feed it live in package evidence.
package watchdog
