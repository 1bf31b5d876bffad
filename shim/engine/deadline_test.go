package engine

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/spec"
)

// The deadline kills when it passes, then reports it; a contract without
// one arms nothing, and a stopped deadline never fires.
func TestArmDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBoundary(spec.NetnsPrivate, log.L) // not bound: the note goes nowhere
		var d Deadline
		// The kill runs on the timer's goroutine after this one read the
		// count, with no happens-before between the two (a timer's firing
		// is none): an atomic counter, or -race reports it.
		var kills atomic.Int32
		ArmDeadline(&d, spec.Contract{Deadline: "1m"}, b, "task", func() error { kills.Add(1); return errors.New("gone") }, log.L)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if kills.Load() != 0 {
			t.Fatal("killed before the deadline")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if kills.Load() != 1 || !d.Stop() {
			t.Fatalf("kills %d, hit %v", kills.Load(), d.Stop())
		}

		var none Deadline
		ArmDeadline(&none, spec.Contract{}, b, "task", func() error { kills.Add(1); return nil }, log.L)
		time.Sleep(time.Hour)
		synctest.Wait()
		if kills.Load() != 1 || none.Stop() {
			t.Fatal("a contract without a deadline killed")
		}

		var stopped Deadline
		ArmDeadline(&stopped, spec.Contract{Deadline: "1s"}, b, "task", func() error { kills.Add(1); return nil }, log.L)
		if stopped.Stop() {
			t.Fatal("hit before it passed")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if kills.Load() != 1 {
			t.Fatal("a stopped deadline fired")
		}
	})
}
