// Package cgroup owns the few cgroup v2 facts the boundary needs: where the
// cgroup2 hierarchy is mounted (read from /proc/self/mountinfo, never assumed:
// hybrid hosts mount it at /sys/fs/cgroup/unified), which cgroup a process is
// in, a cgroup's id (the number nftables' `socket cgroupv2` matches) and depth,
// and draining a cgroup of every process at task exit.
//
// It never creates, moves into or configures cgroups (runc and the runtime own
// that), and never follows a path that does not resolve under the cgroup2
// mount. Paths are cgroup paths as /proc/<pid>/cgroup prints them ("/a/b"),
// relative to the caller's cgroup namespace; Hierarchy.Dir maps them to
// directories.
package cgroup
