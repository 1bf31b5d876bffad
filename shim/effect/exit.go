package effect

import (
	"fmt"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/netpolicy"
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
// read), the denied attempts, the escapes and the gate's part (Gate). Call
// it after Admission, which leaves Deadlines.Exceeded to this. sharedNetns
// says the table's rules match only the bound cgroup (a host or pod
// namespace): a process found outside it was not confined, so an escape
// makes the network status escape_detected. In a namespace of its own the
// table drops what any process sends, and an escape changes nothing.
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
	if len(x.Escapes) > 0 && sharedNetns {
		m.Enforcement.Network.Status = spec.NetworkEscapeDetected
	}
	Gate(m, x.GateRan, x.GateRes, x.GateErr, x.DrainErr)
}

// Bound fills m with the subject the table was bound to and the table's
// scope: the subject's cgroup in netns (a shared one: host, pod, a path),
// or, when private, the netns the subject has to itself, whose table drops
// whatever it sends (denials of the cgroup counted apart).
func Bound(m *spec.Manifest, s spec.Subject, netns string, private bool) {
	m.Subject = s
	m.Enforcement.Network.Scope = fmt.Sprintf("cgroupv2 %s (id %d), %s netns", s.CgroupPath, s.CgroupID, netns)
	if private {
		m.Enforcement.Network.Scope = fmt.Sprintf("netns (private: everything it sends; denials of cgroupv2 %s (id %d) counted apart)", s.CgroupPath, s.CgroupID)
	}
}
