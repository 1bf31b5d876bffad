package service

import (
	"runtime/debug"
	"testing"
	"testing/synctest"
	"time"
)

func TestHoldGCNestsAndRestores(t *testing.T) {
	before := debug.SetGCPercent(55)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	// The bubble's clock moves only when every goroutine in it waits, so
	// each release has run (or not) exactly when the sleeps below say.
	synctest.Test(t, func(t *testing.T) {
		holdGC(20 * time.Millisecond)
		holdGC(80 * time.Millisecond)
		// Read back by setting the same value: a hold leaves the
		// percentage at gcHeldPercent (never -1, whose set waits for a
		// collection in progress).
		if got := debug.SetGCPercent(gcHeldPercent); got != gcHeldPercent {
			t.Fatalf("during a hold: GC percent %d, want %d (the memory limit alone bounds the heap)", got, gcHeldPercent)
		}
		if got := debug.SetMemoryLimit(-1); got < gcBurstLimit+1<<20 {
			t.Fatalf("during a hold: memory limit %d, want gcBurstLimit (%d) above the memory in use (%d)", got, gcBurstLimit, goMemoryInUse())
		}
		time.Sleep(50 * time.Millisecond) // the first hold released, the second not
		synctest.Wait()
		if got := debug.SetGCPercent(gcHeldPercent); got != gcHeldPercent {
			t.Fatalf("one hold left: GC percent %d, want %d", got, gcHeldPercent)
		}
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if got := debug.SetGCPercent(-1); got != 55 {
			t.Fatalf("after the last release: GC percent %d, want 55", got)
		}
		debug.SetGCPercent(55)
	})
}
