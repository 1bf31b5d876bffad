// Package sandbox holds the two kernel building blocks a host run
// (shim/hostrun's wrapper) applies to itself right before it execs the
// command: a seccomp filter (HostFilter, InstallFilter) and a Landlock domain
// (Landlock.Restrict).
//
// It owns the host run's seccomp program, compiled here as classic BPF from
// the same socket-family allowlist and refused-syscall list that
// shim/sockrule holds and shim/specpolicy puts into a container's profile (so the two cannot drift),
// plus the refusals only a host run needs (user namespaces, clone3, the mount
// API, TIOCSTI); and it owns the mapping from a Landlock request to the
// handled accesses of the running kernel's ABI, reporting in Applied exactly
// what holds and, in Applied.Missing, what was asked for that this kernel
// cannot enforce.
//
// Both act on the calling thread only (no TSYNC): the caller locks its OS
// thread, sets no_new_privs, drops credentials, calls Restrict and
// InstallFilter (either order: the filter refuses nothing Restrict needs),
// and execs on that thread; what the thread execs inherits both.
//
// What neither covers at Landlock ABI 7: connecting to a pathname unix
// socket (a runtime's or D-Bus's socket the uid may write) is not a
// filesystem access Landlock checks, and UDP is not handled; the run's
// network namespace or nftables must cover those.
//
// It must never widen: no rule grants what the caller did not ask for, an
// access the ABI cannot enforce is never reported as applied, and a Writable
// directory that cannot be opened is an error, not a skipped rule. It must
// never fork, exec, print, or change any thread but the caller's.
package sandbox
