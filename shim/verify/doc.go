// Package verify re-hashes an operation's staged products against its
// manifest and records what differs as boundary evidence. gensee manifest
// verify (one operation, or --all from a timer) and retention (right before
// it removes an operation record) both go through it, so a person checking
// and the runtime pruning find, word and flag the same problems the same
// way, and one never raises again what the other already has open.
//
// Staged does the reading (gate.VerifyStaged: file descriptors that never
// follow a symlink) and groups the problems by product slot; Raise appends
// a product_mismatch event per slot to the operation's events.jsonl, folds
// it through the watchdog (whose product_mismatch signature fires on it
// alone) and raises the finding on the operation's attention. A slot whose
// same problems are already an open finding is not raised again.
//
// It sits below the CLI and beside retention: it imports gate, events,
// watchdog and record, and nothing that imports it.
package verify
