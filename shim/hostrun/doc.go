// Package hostrun is the engine of the second front door, `gensee boundary
// run -- CMD` (docs/design.md §10): one plain host command under exactly one
// admitted contract, composed from the packages the shim uses (trust,
// admission, observe, netpolicy, cgroup, monitor, drain, gate, effect,
// record).
//
// Order (run.go): trusted facts (runtime "host", the invoking user) and the
// re-derived observation; admission; the operation record; a transient
// cgroup under <cgroup2>/gensee; the wrapper — gensee-sandbox (or a
// re-exec of the gensee binary) born in the cgroup (CLONE_INTO_CGROUP)
// and in a private mount namespace — building the command's view while
// the nftables table in the host netns is bound to the cgroup and read
// back, and the monitor opened; nothing of the command runs before the
// go, which waits for the read-back, so the table is in place first. The
// wrapper mounts the staged workspace (overlay, lower = the real
// workspace), makes every other mount read-only with private tmpfs /tmp
// and /var/tmp, drops to the invoking user with no capabilities and
// no_new_privs, closes inherited fds and executes the hashed fd. At exit:
// drain, gate on the upper dir, counters, table and cgroup removed,
// manifest.
//
// It must never write to the real workspace or the host's files on the
// command's behalf, never run the command with a capability, and never
// leave a table, cgroup or mount behind: the parent removes them whatever
// the wrapper does, and a later run removes those of a parent that died
// (orphans recorded under <state>/hostruns).
package hostrun
