package gcburst

import (
	"runtime/debug"
	"testing"
	"time"
)

func TestHoldNestsAndRestores(t *testing.T) {
	before := debug.SetGCPercent(55)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	Hold(20 * time.Millisecond)
	Hold(80 * time.Millisecond)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("during a hold: GC percent %d, want -1 (off)", got)
	}
	if got := debug.SetMemoryLimit(-1); got < Limit+1<<20 {
		t.Fatalf("during a hold: memory limit %d, want Limit (%d) above the memory in use (%d)", got, Limit, inUse())
	}
	time.Sleep(50 * time.Millisecond) // the first hold released, the second not
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("one hold left: GC percent %d, want -1", got)
	}
	time.Sleep(100 * time.Millisecond)
	if got := debug.SetGCPercent(-1); got != 55 {
		t.Fatalf("after the last release: GC percent %d, want 55", got)
	}
	debug.SetGCPercent(55)
}
