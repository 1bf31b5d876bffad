// Package evidence runs the kernel-side sensors that feed the watchdog, each
// inside the container's network namespace and each a small type with one
// Run loop and a narrow seam to the kernel:
//
//   - TableWatcher: the operation's nftables table changed or vanished
//     (nftables Monitor on its own connection, plus a periodic read-back
//     compared with the plan, since monitor messages can be lost);
//   - FlowPoller: conntrack holds a flow that got a reply from a watched
//     (earlier denied) target;
//   - CounterPoller: the table's allow and deny counters moved.
//
// Sensors only look. They never change a table, a flow or a verdict, never
// flush conntrack, and report each change once: deciding what it means is
// the watchdog's job.
package evidence
