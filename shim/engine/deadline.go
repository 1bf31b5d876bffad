package engine

import (
	"sync"
	"time"

	"github.com/containerd/log"
	"github.com/gensee/gensee/spec"
)

// Deadline is the contract deadline's timer and whether it fired.
type Deadline struct {
	mu    sync.Mutex
	timer *time.Timer // guarded by mu
	hit   bool        // guarded by mu
}

// Arm calls fire after d unless stopped first; d <= 0 arms nothing.
func (d *Deadline) Arm(after time.Duration, fire func()) {
	if after <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = time.AfterFunc(after, func() {
		d.mu.Lock()
		d.hit = true
		d.mu.Unlock()
		fire()
	})
}

// Stop stops the timer and reports whether it had fired.
func (d *Deadline) Stop() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	return d.hit
}

// ArmDeadline arms d with the contract's deadline (none: nothing): when it
// passes, kill ends the workload first (nothing — a blocked log write, a
// stopped terminal — may hold the kill up), then b notes deadline_exceeded
// and the log says so. what names the workload ("task", "container",
// "command").
func ArmDeadline(d *Deadline, c spec.Contract, b *Boundary, what string, kill func() error, l *log.Entry) {
	after, err := c.DeadlineDuration()
	if err != nil {
		return // a malformed one never passes catalog validation
	}
	d.Arm(after, func() {
		kerr := kill()
		b.Note(spec.Event{Kind: spec.EventDeadlineExceeded, Control: "deadline", Rule: c.Deadline,
			Detail: "the contract deadline " + c.Deadline + " passed; the " + what + " was killed"})
		if kerr != nil {
			l.WithError(kerr).Error("kill at deadline")
		}
		l.WithField("deadline", c.Deadline).Warn("contract deadline exceeded; the " + what + " was killed")
	})
}
