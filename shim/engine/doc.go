// Package effect assembles the parts of the effect manifest (docs/design.md §6)
// that every front door shares: the gate's verdict, products, violations,
// unclaimed and excluded changes, and the gate_rejected events a run emits.
//
// It claims only what the gate read; it must never run the gate, stage a
// file, or mark anything verified or promoted.
package engine
