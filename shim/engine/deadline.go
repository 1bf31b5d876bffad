package engine

import (
	"sync"
	"time"
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
