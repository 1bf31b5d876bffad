// Package drain is the exit path's kill step, shared by every front door:
// the bound cgroup drained (cgroup.kill), and every process the binding
// sensor found outside it, with its descendants, killed through verified
// pidfds and listed as an escape.
//
// It owns the order of those steps; it must never decide a verdict or
// touch the network table.
package drain
