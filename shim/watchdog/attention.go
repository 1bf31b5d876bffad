package watchdog

import (
	"slices"

	"github.com/gensee/gensee/spec"
)

// Attention returns the operation's attention and whether it is set.
func (w *Watchdog) Attention() (spec.Attention, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.findings) == 0 {
		return spec.Attention{}, false
	}
	return spec.Attention{
		OperationID: w.cfg.OperationID,
		State:       spec.AttentionControlDefeat,
		Findings:    slices.Clone(w.findings),
	}, true
}

// Clear clears the attention: a person looked. The trail, and what in it is
// spent, stay.
func (w *Watchdog) Clear() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.findings = nil
}

// End is the task's end: it clears the attention and ends a denial loop.
func (w *Watchdog) End() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.findings = nil
	w.loop.reset()
}
