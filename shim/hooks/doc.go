// Package hooks is the third front door (docs/design.md §10): an OCI hooks adapter
// that gives containers of runtimes without containerd (podman, CRI-O,
// BuildKit's OCI worker: anything that runs runc with oci-hooks(5)) the
// same boundary as the shim, composed from the same engine packages (trust,
// admission, observe, specpolicy, netpolicy, cgroup, monitor, drain, gate,
// effect, record).
//
// Ordering rules, which every handler below keeps:
//
//  1. createRuntime (run by runc, the container's init blocked in `runc
//     init`, its namespaces and cgroup made, nothing of the image run):
//     admission from config.json; the spec policy on a copy (a hook cannot
//     edit the spec, so a spec the policy would narrow is refused with the
//     fix); the operation record; then the per-operation monitor process,
//     which installs the table bound to the container's cgroup in its netns,
//     reads it back and starts the sensors, and only then reports ready. The
//     hook exits 0 only after that report: a non-zero exit fails the create.
//  2. The monitor process holds the netns (so the table and its counters
//     outlive the container's last process), follows the init by pidfd and,
//     when it exits, drains the cgroup and every escaped process at once.
//  3. poststop (run by the engine after the container is gone, its rootfs
//     still mounted) asks the monitor to finish: gate on the overlay
//     upperdir, staging, counters, table removal, manifest. The monitor
//     answers when the manifest is written, then exits.
//  4. No poststop (the engine died, a later hook failed, the container was
//     never started): once the init is gone the monitor waits Grace, then
//     finishes on its own the same way and exits. A monitor that died is
//     found by the next hook (its marker names a dead owner and the
//     container's cgroup): the cgroup is drained first (the container
//     may still run), then the table is removed, then a manifest that
//     says the monitor died is written and the operation marked cleaned.
//
// It must never let a container start whose table is not installed and read
// back, never edit the bundle, and never leave a table, a monitor process or
// a socket behind.
package hooks
