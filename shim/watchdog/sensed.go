package watchdog

import (
	"fmt"
	"time"

	"github.com/gensee/gensee/spec"
)

// What the sensors saw, as events. Each builds the
// event, folds it in (Note) and returns it first in Result.Events, for the
// caller to record and publish. at is when the control or sensor saw it;
// recv is the caller's receive clock.

// Denied folds one denied egress attempt to target ("ip:port/proto").
func (w *Watchdog) Denied(target string, at, recv time.Time) Result {
	return w.fold(spec.Event{
		Kind: spec.EventEgressDenied, Control: "network", Rule: w.cfg.DenyRule,
		Detail: fmt.Sprintf("packet to %s dropped: not in the contract's allow list", target),
		Target: target, At: at, OperationID: w.cfg.OperationID,
		Hint: "an outbound destination belongs in the contract's network.allow; if this packet answers a connection the workload accepted (a server, a kubelet probe, a Service), its port belongs in network.serve",
	}, recv)
}

// Reached folds a sighting of target reached (detail: how, e.g. the
// conntrack flow, or its allow counter moving).
func (w *Watchdog) Reached(target, detail string, at, recv time.Time) Result {
	return w.fold(spec.Event{
		Kind: spec.EventFlowReached, Control: Control,
		Detail: detail, Target: target, At: at, OperationID: w.cfg.OperationID,
	}, recv)
}

// TableDrift folds a change of the operation's table (detail: what
// differs, who changed it when known).
func (w *Watchdog) TableDrift(detail string, at, recv time.Time) Result {
	return w.fold(spec.Event{
		Kind: spec.EventTableTampered, Control: "network", Rule: w.cfg.Table,
		Detail: detail, At: at, OperationID: w.cfg.OperationID,
	}, recv)
}

// CgroupChanged folds a policy_unbound: the container's cgroup is no longer
// the one the rules are bound to, or a process of it is outside it. Alone it
// fires nothing; a non-empty target joins the deny-then-reach watch. The
// binding sensor names an escaped process "pid N in /cgroup" (one event per
// process); a reach is matched to it only by that exact target.
func (w *Watchdog) CgroupChanged(target, detail string, at, recv time.Time) Result {
	return w.fold(spec.Event{
		Kind: spec.EventPolicyUnbound, Control: "cgroup",
		Detail: detail, Target: target, At: at, OperationID: w.cfg.OperationID,
	}, recv)
}

// ProductMismatch folds a staged product (slot) that no longer matches its
// manifest digest.
func (w *Watchdog) ProductMismatch(slot, detail string, at, recv time.Time) Result {
	return w.fold(spec.Event{
		Kind: spec.EventProductMismatch, Control: "gate", Rule: "staged_digest",
		Detail: detail, Target: slot, At: at, OperationID: w.cfg.OperationID,
	}, recv)
}

// AllowedFlow records that the table let something through (its allow
// counter moved): progress, which ends a denial loop.
func (w *Watchdog) AllowedFlow(recv time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.loop.reset()
}

func (w *Watchdog) fold(ev spec.Event, recv time.Time) Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.note(ev, recv)
	r.Events = append([]spec.Event{ev}, r.Events...)
	return r
}
