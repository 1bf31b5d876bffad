// Package evidence runs the kernel-side sensors that feed the watchdog, each
// a small type with one Run loop and a narrow seam to the kernel; the
// network ones work inside the container's network namespace:
//
//   - TableWatcher: the operation's nftables table changed or vanished
//     (nftables Monitor on its own connection, plus a periodic read-back
//     compared with the plan, since monitor messages can be lost; between
//     two full read-backs, at most fullEvery polls apart, a poll reads the
//     table back only when the namespace's nf_tables generation moved, see
//     netpolicy's gen.go);
//   - FlowPoller: conntrack holds a flow that got a reply from a watched
//     (earlier denied) target, or that such a target opened and the
//     container answered (a served port's peer);
//   - CounterPoller: the table's allow and deny counters moved;
//   - BindingPoller: the bound cgroup is gone or replaced, or a process of
//     the container (any process ever seen in the cgroup, remembered by pid
//     and start time, and every process of the container's own pid
//     namespace) is outside it: one Unbound per escaped process, its target
//     "pid N in /cgroup". It reads the host's /proc, so its namespace scan is
//     bounded: namespace links only, cached per pid, at most a few hundred
//     read per poll and at most 1% of a core (see nsDuty).
//
// Sensors only look. They never change a table, a flow, a process or a
// verdict, never flush conntrack, and report each change once: deciding
// what it means is the watchdog's job (and killing escaped processes the
// exit path's, through package cgroup).
package evidence
