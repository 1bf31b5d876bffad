// Package inner is what runs inside a host run's namespaces before the
// command: the wrapper (pid 1 of the run) and the stage, and the protocol
// the gensee parent (shim/hostrun) speaks with them. It is built into the
// small static gensee-sandbox binary (cmd/gensee-sandbox), so it imports
// nothing of the shim beyond shim/sandbox: the wrapper and the stage start
// in a few milliseconds, not the CLI's tens.
//
// The host run's processes, outermost first (README, "Host commands"):
//
//   - the gensee parent (root, the caller's namespaces): admission, the
//     record, the cgroup, the table, the sensors, the exit path;
//   - the wrapper, born into the run's cgroup (CLONE_INTO_CGROUP) with a
//     new mount, pid, ipc and uts namespace and a new session: pid 1 of
//     the run. Still root, it unshares a cgroup namespace (rooted at the
//     run's cgroup), builds the command's view of the file system
//     (openView, then finish), starting the stage as soon as the run's
//     procfs and the staged workspace exist, reports ready, waits for the
//     parent's go and hands it on to the stage, and then only forwards
//     signals and reaps; when the stage's process ends it kills and counts
//     what is left in the pid namespace and exits with the command's
//     status;
//   - the stage, in a new user namespace mapping the invoking uid and gid
//     to themselves and nothing else: once the view is finished and
//     read-only it gets its spec, drops every privilege and applies
//     Landlock on its one thread while the parent arms its sensors, waits
//     for the go, then installs seccomp and executes the sealed copy of the
//     command (execveat).
//
// After the run, the parent hands the sockets that deleted its table to a
// last gensee-sandbox process (LingerMain) that only exits: the kernel
// frees a deleted table an RCU grace period later, and the release of
// those sockets waits for it; in a process of its own, nobody waits.
//
// No code of the command runs before the stage's exec, and the stage runs
// only after the parent's go (table read back, sensors running). This
// package must never run the command with a capability, reach the host's
// view from inside the stage, or report a layer it did not apply.
package inner
