// Package engine is the operation engine behind the three front doors
// (docs/design.md §1, §10): the containerd shim (shim/service), host runs
// (shim/hostrun) and the OCI hooks (shim/hooks). A door keeps only its
// lifecycle and transport; the engine owns the steps every operation
// takes, in one order:
//
//   - Bind: the network boundary (Boundary) planned from the contract,
//     its telemetry opened, the door's marker written, the deny-log reader
//     bound and the table installed and read back, before the workload's
//     first instruction;
//   - Finish: the exit path — the gate prepared, the drain, the gate
//     (bounded by its limit, a panic a failed verdict) beside the
//     network's end (sensors stopped, counters, denied attempts, table
//     removed), the exit status, the manifest made durable, the release;
//   - Manifest: one effect manifest builder, fed the door's own account
//     (Door) and what the exit path learned (Facts, Exit);
//   - Asker: a door's request to the selector's node analyzer when its
//     caller attached no inference (shim/analyzer does the exchange,
//     shim/admission verifies what comes back).
//
// The manifest claims only what a control enforced or a sensor observed;
// nothing here ever marks a product verified or promoted, and nothing here
// decides admission (shim/admission does, before Bind).
package engine
