package service

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// The Go collector is held off while a task starts.
//
// containerd's pkg/shim runs every shim with GOGC=40 (a small resident
// heap for a shim that sits beside a sleeping container for days). A task's
// Create, Start and, for a short task, its whole exit path are one burst of
// a few MB of short-lived allocations (spec and catalog decoding, netlink
// dumps, records): at GOGC=40 that is about ten collections and their
// sweeps, the largest single CPU cost of the shim on the start path, and on
// a loaded node CPU is latency. holdGC raises the percentage out of reach
// for the burst (gcHeldPercent), bounded by a memory limit (the collector
// still runs if the burst is larger than that), and the release restores
// both and returns the burst's garbage to the kernel, so the sleeping
// container's shim is as small as before.
//
// A hold owns the process's collector settings while it is in flight; it
// must never be the only bound on memory (the limit stays) nor hold past
// its release.

// gcBurstLimit is how much the shim's Go memory may grow during a hold:
// past it the collector runs as if no hold were set.
const gcBurstLimit = 64 << 20

// gcBurstSettle is how long a hold lasts: a task's Create, Start and the
// first moments of its run (all of a trivial task's life, exit path
// included).
const gcBurstSettle = time.Second

// gcHeldPercent is the collector's percentage during a hold: a goal some
// 650 times the live heap, so the memory limit alone bounds it. Not -1
// (off): SetGCPercent(-1) waits for a collection in progress to end, and
// a hold can begin during one (the shim's first did, in its task plugin,
// while the preload begun in main had just passed pkg/shim's GOGC=40 goal
// of 1.6 MB: the plugin's start waited 1-2 ms for it; a later Create of a
// shim that serves several tasks can). Raised instead, a collection in
// progress ends on its own, beside the caller, and none starts after it.
const gcHeldPercent = 1 << 16

// gcBurst is package state because the collector settings it saves are
// the process's, not one service's.
var gcBurst struct {
	mu        sync.Mutex // guards the fields below
	held      int
	prevGC    int
	prevLimit int64
}

// holdGC holds the percentage collector off until d has passed, bounded by
// a memory limit gcBurstLimit above what the runtime holds now (a shim with
// a large heap does not collect continuously); holds nest, the last release
// restores the settings.
func holdGC(d time.Duration) {
	gcBurst.mu.Lock()
	if gcBurst.held == 0 {
		// The limit first: at no moment is the raised percentage
		// without its bound.
		gcBurst.prevLimit = debug.SetMemoryLimit(goMemoryInUse() + gcBurstLimit)
		gcBurst.prevGC = debug.SetGCPercent(gcHeldPercent)
	}
	gcBurst.held++
	gcBurst.mu.Unlock()
	time.AfterFunc(d, releaseGC)
}

// goMemoryInUse is the Go runtime's total memory now (what a memory limit
// counts).
func goMemoryInUse() int64 {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(m[0].Value.Uint64())
}

func releaseGC() {
	gcBurst.mu.Lock()
	gcBurst.held--
	last := gcBurst.held == 0
	if last {
		debug.SetGCPercent(gcBurst.prevGC)
		debug.SetMemoryLimit(gcBurst.prevLimit)
	}
	gcBurst.mu.Unlock()
	if last {
		// One collection for the whole burst, and its pages back to the
		// kernel: the resident size of a sleeping task's shim.
		debug.FreeOSMemory()
	}
}
