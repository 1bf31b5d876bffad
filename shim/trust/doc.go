// Package trust owns the shim's roots of trust on the host (docs/design.md §3): the
// trust anchor file (the catalog root public key), loading and verifying
// the signed catalog against it, and the catalog high-water mark that
// refuses rollbacks and equivocation across shim restarts.
//
// Invariants:
//   - The anchor is only ever read from a path the root-owned operator
//     config names; it must be a regular file (never a symlink), owned by
//     root, mode owner-only, single-linked, under directories that only
//     root can write. Anything else is refused with an *AnchorError that
//     names the file, the rule and the fix. It never accepts a key from a
//     caller, an annotation or the catalog itself.
//   - The catalog payload is parsed only after its signature verified
//     against the anchor; a catalog is accepted only if unexpired, not
//     issued in the future beyond ClockSkew, and not older than (or, at the
//     same version, different from) the highest version accepted before.
//
// This package must never decide admission (see shim/admission), never
// touch the network, and never take a trust input from a container.
package trust
