// Package retention owns how long the records under the state directory
// live: which finished operation records (operations/<id>/ and their index
// entries) and which lines of refusals.jsonl the operator config's
// [retention] limits let go, and removing them. It also reads the facts
// each operation record shows (Scan), for gensee ls and gensee prune.
//
// Decide is pure: facts and limits in, removals out. Run applies a
// decision under an exclusive lock on the state directory; the shim runs
// it in the background after a task's Delete (Background), gensee prune
// on demand.
//
// It must never remove an operation whose task may still run (no
// manifest.json yet, or a host-run marker), one its task was not deleted
// from yet (no cleaned marker: the network table may still exist), or one
// whose attention is set (a person has not looked). Right before an
// operation goes, its staged products are re-hashed against its manifest
// (shim/verify, the check gensee manifest verify makes): a mismatch is
// raised as a product_mismatch finding and keeps the record, so tampering
// no person looked for is flagged instead of deleted with its evidence.
// It must never remove a
// record half-way: an operation's index entries go first, then its
// directory is renamed aside in one step and only then emptied, so a crash
// leaves every other record whole and the next run finishes the job.
// refusals.jsonl is only ever cut at its oldest end, under its lock.
package retention
