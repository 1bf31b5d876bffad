package watchdog

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gensee/gensee/spec"
)

// denialLoop is the guidance signature: consecutive egress denials with no
// allowed flow in between are not progress. From the second one it emits
// one hint_loop event; the loop's further retries emit nothing; an allowed
// flow or the task's end ends the loop. Guidance only: it never touches the
// attention or any decision.
type denialLoop struct {
	n       int      // consecutive denials
	targets []string // distinct targets denied in this loop, first few
	emitted bool
}

const loopTargetsShown = 3

// denied counts one denial and returns the hint_loop event when this
// denial makes the loop.
func (l *denialLoop) denied(ev spec.Event, recv time.Time, cfg Config) (spec.Event, bool) {
	l.n++
	if ev.Target != "" && !slices.Contains(l.targets, ev.Target) && len(l.targets) < loopTargetsShown {
		l.targets = append(l.targets, ev.Target)
	}
	if l.n < 2 || l.emitted {
		return spec.Event{}, false
	}
	l.emitted = true
	allowed := "no network at all"
	if cfg.Allowed != "" {
		allowed = "only " + cfg.Allowed
	}
	return spec.Event{
		Kind:    spec.EventHintLoop,
		Control: Control,
		Rule:    RuleDenialLoop,
		Detail: fmt.Sprintf("%d consecutive egress denials with no allowed flow in between: %s",
			l.n, strings.Join(l.targets, ", ")),
		Target:      ev.Target,
		At:          recv,
		OperationID: cfg.OperationID,
		Hint: "retrying will not help: the contract allows " + allowed +
			"; host names and DNS belong in a mediator outside the container, not in its network",
	}, true
}

// reset ends the loop (an allowed flow, the task's end).
func (l *denialLoop) reset() { *l = denialLoop{} }
