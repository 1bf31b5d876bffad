// Package telemetry is one operation's boundary telemetry, shared by every
// front door (the containerd shim, host runs and the OCI hooks): the events
// log, the NFLOG reader of denied packets, the watchdog and its sensors
// (table drift, deny-then-reach flows, counters, cgroup binding).
//
// It owns the operation's events.jsonl while the operation runs and the
// attention raised by the watchdog's findings. It reports; it must never
// decide anything, install or remove a table, or stop the workload.
package telemetry
