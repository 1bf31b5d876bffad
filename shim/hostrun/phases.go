package hostrun

import (
	"time"

	"github.com/containerd/log"
)

// phases times a run's steps for its debug line ("host run phases"): one
// <step>_ms field a step, each the time since the step before, as the
// shim's create line and engine.Finish's exit line do.
type phases struct {
	last   time.Time
	fields log.Fields
}

func newPhases() *phases { return &phases{last: time.Now(), fields: log.Fields{}} }

// mark ends step name now.
func (p *phases) mark(name string) {
	now := time.Now()
	p.fields[name+"_ms"] = ms(now.Sub(p.last))
	p.last = now
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
