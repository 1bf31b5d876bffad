package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// Every pair of states: only the documented transitions are allowed.
func TestOpStateTransitions(t *testing.T) {
	allowed := map[[2]opState]bool{
		{opCreated, opStarting}: true, {opCreated, opDeleting}: true,
		{opStarting, opRunning}: true, {opStarting, opCreated}: true,
		{opRunning, opExited}:   true,
		{opExited, opDeleting}:  true,
		{opDeleting, opDeleted}: true, {opDeleting, opCreated}: true, {opDeleting, opExited}: true,
	}
	states := []opState{opCreated, opStarting, opRunning, opExited, opDeleting, opDeleted}
	for _, from := range states {
		for _, to := range states {
			if got := from.next(to); got != allowed[[2]opState{from, to}] {
				t.Errorf("%s -> %s: allowed=%v, want %v", from, to, got, !got)
			}
		}
	}
}

// A refused move names the verb and the state, as containerd's shims do,
// and carries FailedPrecondition; the state does not change.
func TestLifecycleErrors(t *testing.T) {
	var l lifecycle
	if err := l.move("start", opStarting); err != nil {
		t.Fatal(err)
	}
	if err := l.move("start", opRunning); err != nil {
		t.Fatal(err)
	}
	err := l.move("start", opStarting)
	if err == nil || err.Error() != "cannot start a task in running state: failed precondition" || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("second start: %v", err)
	}
	if err := l.move("delete", opDeleting); err == nil || !strings.Contains(err.Error(), "cannot delete a task in running state") {
		t.Fatalf("delete of a running task: %v", err)
	}
	if l.current() != opRunning {
		t.Fatalf("state %s after refused moves, want running", l.current())
	}
}
