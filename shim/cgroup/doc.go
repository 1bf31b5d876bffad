// Package cgroup owns the few cgroup v2 facts the boundary needs: where the
// cgroup2 hierarchy is mounted (read from /proc/self/mountinfo, never assumed:
// hybrid hosts mount it at /sys/fs/cgroup/unified), which cgroup a process is
// in, a cgroup's id (the number nftables' `socket cgroupv2` matches) and depth,
// its processes, and draining a cgroup of every process at task exit —
// including, with KillTrees, processes of the container that left it: each
// signalled only through a pidfd whose start time was re-read after the open
// (Proc: pid plus start time), so a reused pid is never killed.
//
// It never creates, moves into or configures cgroups (runc and the runtime own
// that), never signals a pid it has not pinned and verified, and never follows
// a path that does not resolve under the cgroup2 mount. Paths are cgroup paths as /proc/<pid>/cgroup prints them ("/a/b"),
// relative to the caller's cgroup namespace; Hierarchy.Dir maps them to
// directories.
package cgroup
