package engine

import (
	"errors"
	"testing"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

func TestCounted(t *testing.T) {
	var x Exit
	if denied, read := x.Counted(netpolicy.Counters{Denied: netpolicy.Count{Packets: 3}}, nil); denied != 3 || !read || x.Counters == nil || x.CountErr != nil {
		t.Fatalf("read: %d %v %+v", denied, read, x)
	}
	boom := errors.New("boom")
	if denied, read := x.Counted(netpolicy.Counters{}, boom); denied != 0 || read || x.Counters != nil || x.CountErr != boom {
		t.Fatalf("not read: %d %v %+v", denied, read, x)
	}
}

func TestExited(t *testing.T) {
	esc := []spec.Escape{{PID: 7}}
	for _, tc := range []struct {
		name   string
		x      Exit
		shared bool
		status string
		check  func(m *spec.Manifest) bool
	}{
		{"counted", Exit{Drained: 2, Removed: "deleted", Deadline: true, GateRan: true,
			Counters: &netpolicy.Counters{Allowed: netpolicy.Count{Packets: 1}, DeniedKernel: netpolicy.Count{Packets: 2}}},
			true, spec.NetworkEnforced, func(m *spec.Manifest) bool {
				return m.Drained == 2 && m.Enforcement.Network.TableRemoved == "deleted" && m.Deadlines.Exceeded &&
					m.Observation.Counters.AllowedPackets == 1 && m.Observation.Counters.DeniedPackets == 2 && m.Gate.Verdict == spec.VerdictPass
			}},
		{"counters unread", Exit{CountErr: errors.New("netlink: boom")}, true, spec.NetworkEnforced, func(m *spec.Manifest) bool {
			return m.Observation.Counters.Error == "netlink: boom" && m.Gate.Verdict == spec.VerdictNotRun
		}},
		{"escape in a shared netns", Exit{Escapes: esc}, true, spec.NetworkEscapeDetected, func(m *spec.Manifest) bool {
			return len(m.Observation.Escapes) == 1
		}},
		{"escape in a netns of its own", Exit{Escapes: esc}, false, spec.NetworkEnforced, func(m *spec.Manifest) bool {
			return len(m.Observation.Escapes) == 1
		}},
		{"drift in a netns of its own", Exit{Drift: []string{"table gensee_x is missing"}}, false, spec.NetworkDriftDetected, func(m *spec.Manifest) bool {
			return len(m.Observation.TableDrift) == 1
		}},
		{"drift outranks an escape", Exit{Escapes: esc, Drift: []string{"rule 3 differs"}}, true, spec.NetworkDriftDetected, func(m *spec.Manifest) bool {
			return len(m.Observation.Escapes) == 1 && m.Observation.TableDrift[0] == "rule 3 differs"
		}},
		{"escape outranks unwatched", Exit{Escapes: esc, Unwatched: "the monitor died"}, true, spec.NetworkEscapeDetected, func(m *spec.Manifest) bool {
			return true
		}},
		{"unwatched", Exit{Unwatched: "the monitor died"}, false, spec.NetworkUnwatched, func(m *spec.Manifest) bool {
			return m.Observation.TableDrift == nil
		}},
		{"drain failed", Exit{GateRan: true, GateRes: &gate.Result{Verdict: gate.Pass}, DrainErr: errors.New("EBUSY")}, true, spec.NetworkEnforced, func(m *spec.Manifest) bool {
			return m.Gate.Verdict == spec.VerdictFail
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &spec.Manifest{Enforcement: spec.Enforcement{Network: spec.NetworkEnforcement{Status: spec.NetworkEnforced}}}
			Exited(m, tc.x, tc.shared)
			if m.Enforcement.Network.Status != tc.status || !tc.check(m) {
				t.Errorf("manifest %+v", m)
			}
		})
	}
}

// TestNetworkStatusNeverUpgrades: a status the front door set to other
// than enforced stays, whatever the sensors saw; the drift is still listed.
func TestNetworkStatusNeverUpgrades(t *testing.T) {
	m := &spec.Manifest{Enforcement: spec.Enforcement{Network: spec.NetworkEnforcement{Status: spec.NetworkUnwatched}}}
	NetworkStatus(m, Exit{Escapes: []spec.Escape{{PID: 7}}}, true)
	if m.Enforcement.Network.Status != spec.NetworkUnwatched {
		t.Fatalf("status %q", m.Enforcement.Network.Status)
	}
	NetworkStatus(m, Exit{Drift: []string{"gone"}}, true)
	if m.Enforcement.Network.Status != spec.NetworkUnwatched || len(m.Observation.TableDrift) != 1 {
		t.Fatalf("status %q drift %v", m.Enforcement.Network.Status, m.Observation.TableDrift)
	}
}

// TestNotEnforcedAbstractUnix: the shim's sentence for a pod, word for word.
func TestNotEnforcedAbstractUnix(t *testing.T) {
	want := "abstract AF_UNIX sockets: the container shares the pod network namespace, whose abstract socket names (@name) nftables cannot see; a process there listening on one is reachable from the container"
	if got := NotEnforcedAbstractUnix("container", "pod"); got != want {
		t.Errorf("got %q", got)
	}
}

func TestBound(t *testing.T) {
	s := spec.Subject{InitPID: 7, StartTime: 9, CgroupPath: "/k8s.io/c1", CgroupID: 42}
	var m spec.Manifest
	Bound(&m, s, "pod", false)
	if m.Subject != s || m.Enforcement.Network.Scope != "cgroupv2 /k8s.io/c1 (id 42), pod netns" {
		t.Fatalf("shared: subject %+v scope %q", m.Subject, m.Enforcement.Network.Scope)
	}
	Bound(&m, s, "private", true)
	if m.Enforcement.Network.Scope != "netns (private: everything it sends; denials of cgroupv2 /k8s.io/c1 (id 42) counted apart)" {
		t.Fatalf("private: scope %q", m.Enforcement.Network.Scope)
	}
}
