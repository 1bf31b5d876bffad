package service

import "testing"

// Every pair of states: only the documented transitions are allowed.
func TestOpStateTransitions(t *testing.T) {
	allowed := map[[2]opState]bool{
		{opCreated, opStarted}: true, {opCreated, opDeleted}: true,
		{opStarted, opExited}: true, {opStarted, opDeleted}: true,
		{opExited, opDeleted}: true,
	}
	states := []opState{opCreated, opStarted, opExited, opDeleted}
	for _, from := range states {
		for _, to := range states {
			if got := from.next(to); got != allowed[[2]opState{from, to}] {
				t.Errorf("%s -> %s: allowed=%v, want %v", from, to, got, !got)
			}
		}
	}
	op := &operation{}
	if !op.transition(opStarted) || op.transition(opStarted) || op.current() != opStarted {
		t.Fatalf("transition: state %s", op.current())
	}
}
