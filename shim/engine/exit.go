package engine

import (
	"fmt"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/watchdog"
	"github.com/gensee/gensee/spec"
)

// Exit is what an exit path learned that every front door's manifest
// reports the same way. A front door keeps it inside its own exit facts,
// next to what only it learns (an exit status, a poststop), and fills it in
// the order it learns it: drain, gate, counters, table removal.
type Exit struct {
	Deadline bool          // the contract's deadline passed and killed the subject
	Drained  int           // processes the drain killed
	DrainErr error         // the drain failed: a process may still write
	Escapes  []spec.Escape // processes of the subject found outside the bound cgroup
	GateRan  bool          // false: the gate never ran (verdict not_run)
	GateRes  *gate.Result
	GateErr  error
	Counters *netpolicy.Counters // nil when not read; CountErr says why
	CountErr error
	Removed  string // how the table went ("deleted", "with_netns"); "" while it is still installed
	Attempts spec.DeniedAttempts
	// Drift is what the table watcher saw differ from the table's plan
	// while the subject ran (monitor.Monitor.Drift, after StopSensors).
	Drift []string
	// Unwatched, when set, says why the sensors stopped before the
	// subject's end (the monitor process died): drift and escapes after
	// that were not observed.
	Unwatched string
	// Findings are the operation's control_defeat findings
	// (events.Findings), FindingsErr why they could not be read.
	Findings    []spec.Finding
	FindingsErr error
}

// Counted keeps what reading the table's counters gave and returns what the
// monitor's Finish takes: the denied packets the table counted and whether
// the counters were read, so
//
//	x.Attempts = mon.Finish(x.Counted(netpolicy.ReadCounters(ctx, fd, plan)))
func (x *Exit) Counted(c netpolicy.Counters, err error) (denied uint64, read bool) {
	if err != nil {
		x.Counters, x.CountErr = nil, err
		return 0, false
	}
	x.Counters, x.CountErr = &c, nil
	return c.Denied.Packets, true
}

// Exited fills m with what x learned: processes drained, how the table
// went, whether the deadline passed, the counters (or why they were not
// read), the denied attempts, the escapes and the gate's part (fillGate). Call
// it after Admission, which leaves Deadlines.Exceeded to this. sharedNetns
// says the table's rules match only the bound cgroup (a host or pod
// namespace): a process found outside it was not confined, so an escape
// makes the network status escape_detected. In a namespace of its own the
// table drops what any process sends, and an escape changes nothing; a
// drift of the table downgrades it in either (NetworkStatus).
func Exited(m *spec.Manifest, x Exit, sharedNetns bool) {
	m.Drained = x.Drained
	m.Enforcement.Network.TableRemoved = x.Removed
	m.Deadlines.Exceeded = x.Deadline
	switch {
	case x.Counters != nil:
		m.Observation.Counters = Counters(*x.Counters)
	case x.CountErr != nil:
		m.Observation.Counters.Error = x.CountErr.Error()
	}
	m.Observation.DeniedAttempts = x.Attempts
	m.Observation.Escapes = x.Escapes
	m.Findings = x.Findings
	if x.FindingsErr != nil {
		m.FindingsError = x.FindingsErr.Error()
	}
	NetworkStatus(m, x, sharedNetns)
	fillGate(m, x.GateRan, x.GateRes, x.GateErr, x.DrainErr)
}

// NetworkStatus downgrades m's network status, the same in every front
// door, from what the sensors saw and the findings raised: a drift of the
// table or a table_tampered finding (it may not have held, whatever the
// netns) makes it drift_detected and lists the drift; else a
// deny_then_reach finding (packets got past it) makes it defeat_detected;
// else an escape in a shared netns (sharedNetns: the rules match only the
// bound cgroup) makes it escape_detected; else sensors that stopped before
// the subject's end make it unwatched. It never upgrades: a status the
// front door already set to something else than enforced stays. Exited
// calls it; a front door that builds its manifest otherwise calls it after
// setting the status.
func NetworkStatus(m *spec.Manifest, x Exit, sharedNetns bool) {
	n := &m.Enforcement.Network
	if len(x.Drift) > 0 {
		m.Observation.TableDrift = x.Drift
	}
	if n.Status != spec.NetworkEnforced {
		return
	}
	switch {
	case len(x.Drift) > 0 || raised(x.Findings, watchdog.SignatureTableTampered):
		n.Status = spec.NetworkDriftDetected
	case raised(x.Findings, watchdog.SignatureDenyThenReach):
		n.Status = spec.NetworkDefeatDetected
	case len(x.Escapes) > 0 && sharedNetns:
		n.Status = spec.NetworkEscapeDetected
	case x.Unwatched != "":
		n.Status = spec.NetworkUnwatched
	}
}

// raised reports whether a finding of signature sig is among fs.
func raised(fs []spec.Finding, sig string) bool {
	for _, f := range fs {
		if f.Signature == sig {
			return true
		}
	}
	return false
}

// Bound fills m with the subject the table was bound to and the table's
// scope: the subject's cgroup in netns (a shared one: host, pod, a path),
// or, when private, the netns the subject has to itself, whose table drops
// whatever it sends (denials of the cgroup counted apart).
func Bound(m *spec.Manifest, s spec.Subject, netns spec.NetnsKind, private bool) {
	m.Subject = s
	m.Enforcement.Network.Scope = fmt.Sprintf("cgroupv2 %s (id %d), %s netns", s.CgroupPath, s.CgroupID, netns)
	if private {
		m.Enforcement.Network.Scope = fmt.Sprintf("netns (private: everything it sends; denials of cgroupv2 %s (id %d) counted apart)", s.CgroupPath, s.CgroupID)
	}
}
