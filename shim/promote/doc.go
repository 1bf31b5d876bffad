// Package promote owns gensee promote: copying one staged product of an
// operation out of <state_dir>/operations/<opid>/staged to a destination
// the operator names, once a semantic verifier the catalog delegates to has
// judged that exact product (a receipt, docs/design.md §15).
//
// The receipt is guidance: a verifier's word on what the product means.
// Everything else is the host's and is checked here, each check a refusal
// that names its rule and the fix and writes nothing: the receipt is signed
// by the catalog verifier it names (the catalog verified against the trust
// anchor as every front door loads it), that verifier judges the product's
// class, the receipt is unexpired, within the verifier's max_lifetime, and
// passes; it names the operation, slot, class and digest the manifest
// records; the manifest parses; the operation has no open finding; the
// staged products re-hash to the manifest (shim/verify, a mismatch raised
// as manifest verify raises it); a product with executable files names a
// consumer contract of the catalog; and the destination lies strictly
// below an operator-listed promotion root, reached without a symlink.
//
// Then one atomic placement: the product is copied, while hashed, into a
// temporary beside the destination (so in its file system), fsynced, and
// renamed into place without replacing anything; a directory product is
// copied as one temporary directory and renamed as one unit; a
// workspace_patch is placed as its patch file and never applied. Modes are
// the staged ones (no setuid, setgid, sticky or group/other write). What
// the copy hashed must equal the manifest's record before the rename, so a
// staged copy changed after the checks is refused too. A promotion record
// (promotions.jsonl) is appended to the operation's records; a re-run with
// the same receipt to a destination that already holds the product
// changes nothing.
//
// Invariants: the manifest is never written (its promoted: false describes
// the run); nothing below a promotion root is reached through a symlink;
// no existing path is replaced; a patch is never applied; a refusal leaves
// the destination as it was. The checks in check.go are pure and
// table-tested; the file work is fd-relative (internal/fsafe). It imports
// spec, record, events, verify, gate (the tree digest), trust (the clock
// skew) and fsafe, and is imported only by the CLI; the catalog comes in
// through Request.Trust (the CLI hands it engine.LoadTrust).
package promote
