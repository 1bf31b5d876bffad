package drain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/telemetry"
	"github.com/gensee/gensee/shim/watchdog/evidence"
	"github.com/gensee/gensee/spec"
)

// Steps are the exit path's kill step's seams: the binding sensor (nil
// funcs when there is none), the cgroup drain and the escaped-process kill.
type Steps struct {
	look    func() []evidence.Unbound // one binding poll now
	listed  func() []evidence.Escape  // escapes listed so far
	escaped func() []cgroup.Proc      // escaped processes alive, listed or not
	report  func(evidence.Unbound)    // record a finding (policy_unbound)
	drain   func(ctx context.Context, path string) (int, error)
	kill    func(ctx context.Context, procs []cgroup.Proc) []cgroup.Killed
	now     func() time.Time
}

// StepsFor wires the kill step to an operation's monitor (nil: none) and
// the kernel.
func StepsFor(m *telemetry.Monitor) Steps {
	k := Steps{drain: cgroup.Drain, kill: cgroup.KillTrees, now: time.Now}
	if m != nil && m.Binding() != nil {
		b := m.Binding()
		k.look, k.listed, k.escaped, k.report = b.CheckAfterExit, b.Escapes, b.Escaped, m.Unbound
	}
	return k
}

// Result is what the kill step did.
type Result struct {
	// Drained counts every process the step killed.
	Drained int
	// Err is the cgroup drain's failure, if any.
	Err error
	// Escapes are processes found outside the bound cgroup
	// (policy_unbound findings), each marked whether the drain killed it.
	Escapes []spec.Escape
}

// All is the exit path's kill step (docs/design.md §6) for the operation bound to
// cgroup path bound. Ordering:
//
//  1. a last binding poll, while the cgroup's processes still live: a child
//     that left the cgroup since the last poll is found through its parent
//     or the pid namespace (a joined one: the init's exit left nothing of
//     its own, BindingPoller.CheckAfterExit);
//  2. the cgroup drain (cgroup.kill: the subtree, atomically);
//  3. another poll: nothing can leave a drained cgroup, but what left just
//     before is listed now;
//  4. every escaped process the sensor knows, and every descendant of one,
//     stopped and killed through pidfds re-checked against their start time
//     (cgroup.KillTrees).
//
// Drained counts every process this step killed: the cgroup's, plus the
// escaped ones whose SIGKILL ended them (not those already dead, e.g. gone
// with their pid namespace's init). Escapes lists every escape, each
// marked whether the drain killed it.
func All(ctx context.Context, bound string, k Steps) (x Result) {
	look := func() {
		if k.look == nil {
			return
		}
		for _, u := range k.look() {
			k.report(u)
		}
	}
	look()
	x.Drained, x.Err = k.drain(ctx, bound)
	if k.look == nil {
		return x
	}
	look()
	var killed []cgroup.Killed
	if procs := k.escaped(); len(procs) > 0 {
		killed = k.kill(ctx, procs)
	}
	recs, found, n := escapeRecords(k.listed(), killed, bound, k.now())
	for _, u := range found {
		k.report(u)
	}
	x.Escapes = recs
	x.Drained += n
	return x
}

// escapeRecords merges the escapes the sensor listed with what the kill
// did: each listed escape marked killed or not, then the descendants the
// kill found outside the bound cgroup (new escapes, returned as findings to
// report too), at most evidence.MaxEscapes records. n counts the processes
// the kill ended.
func escapeRecords(listed []evidence.Escape, killed []cgroup.Killed, bound string, now time.Time) (recs []spec.Escape, found []evidence.Unbound, n int) {
	byProc := make(map[cgroup.Proc]cgroup.Killed, len(killed))
	for _, k := range killed {
		byProc[k.Proc] = k
		if k.Killed {
			n++
		}
	}
	isListed := make(map[cgroup.Proc]bool, len(listed))
	for _, e := range listed {
		isListed[e.Proc] = true
		recs = append(recs, spec.Escape{PID: e.PID, Cgroup: e.Cgroup, At: e.At.UTC(), Killed: byProc[e.Proc].Killed})
	}
	for _, k := range killed {
		switch {
		case isListed[k.Proc]:
			continue
		case !k.Killed && errors.Is(k.Err, cgroup.ErrGone):
			continue // never seen alive by the kill: nothing to say
		case k.Cgroup == "" || cgroup.Within(k.Cgroup, bound):
			continue // not outside (moved back; drained with the cgroup)
		}
		e := evidence.Escape{Proc: k.Proc, Cgroup: k.Cgroup, At: now}
		if k.Parent != 0 {
			// A descendant no poll saw: a finding of its own.
			found = append(found, evidence.Unbound{At: now, Target: e.Target(), Escape: &e,
				Detail: fmt.Sprintf("process %d (child of %d) is in cgroup %s, outside %s the rules bind; found by the exit drain",
					k.PID, k.Parent, k.Cgroup, bound)})
		}
		recs = append(recs, spec.Escape{PID: k.PID, Cgroup: k.Cgroup, At: now.UTC(), Killed: k.Killed})
	}
	if len(recs) > evidence.MaxEscapes {
		recs = recs[:evidence.MaxEscapes]
	}
	return recs, found, n
}
