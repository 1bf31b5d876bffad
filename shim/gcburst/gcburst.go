// Package gcburst holds the Go collector off while a task starts.
//
// containerd's pkg/shim runs every shim with GOGC=40 (a small resident
// heap for a shim that sits beside a sleeping container for days). A task's
// Create, Start and, for a short task, its whole exit path are one burst of
// a few MB of short-lived allocations (spec and catalog decoding, netlink
// dumps, records): at GOGC=40 that is about ten collections and their
// sweeps, the largest single CPU cost of the shim on the start path, and on
// a loaded node CPU is latency. Hold turns the percentage collector off for
// the burst, bounded by a memory limit (the collector still runs if the
// burst is larger than that), and the release restores both and returns
// the burst's garbage to the kernel, so the sleeping container's shim is as
// small as before.
//
// It owns the process's collector settings while a hold is in flight; it
// must never be the only bound on memory (the limit stays) nor hold past
// its release.
package gcburst

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Limit is how much the shim's Go memory may grow during a hold: past it
// the collector runs as if no hold were set.
const Limit = 64 << 20

// Settle is how long a hold lasts: a task's Create, Start and the first
// moments of its run (all of a trivial task's life, exit path included).
const Settle = time.Second

var (
	mu        sync.Mutex // guards the fields below
	held      int
	prevGC    int
	prevLimit int64
)

// Hold turns the percentage collector off until d has passed, bounded by
// a memory limit Limit above what the runtime holds now (a shim with a
// large heap does not collect continuously); holds nest, the last release
// restores the settings.
func Hold(d time.Duration) {
	mu.Lock()
	if held == 0 {
		prevGC = debug.SetGCPercent(-1)
		prevLimit = debug.SetMemoryLimit(inUse() + Limit)
	}
	held++
	mu.Unlock()
	time.AfterFunc(d, release)
}

// inUse is the Go runtime's total memory now (what a memory limit counts).
func inUse() int64 {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(m[0].Value.Uint64())
}

func release() {
	mu.Lock()
	held--
	last := held == 0
	if last {
		debug.SetGCPercent(prevGC)
		debug.SetMemoryLimit(prevLimit)
	}
	mu.Unlock()
	if last {
		// One collection for the whole burst, and its pages back to the
		// kernel: the resident size of a sleeping task's shim.
		debug.FreeOSMemory()
	}
}
