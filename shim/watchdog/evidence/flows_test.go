package evidence

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ti-mo/conntrack"

	"github.com/gensee/gensee/shim/netpolicy"
)

func flow(id uint32, dst string, dport uint16, status conntrack.Status) conntrack.Flow {
	f := conntrack.Flow{ID: id, Status: status}
	f.TupleOrig.IP = conntrack.IPTuple{SourceAddress: netip.MustParseAddr("10.0.0.2"), DestinationAddress: netip.MustParseAddr(dst)}
	f.TupleOrig.Proto = conntrack.ProtoTuple{Protocol: 6, SourcePort: 40000 + uint16(id), DestinationPort: dport}
	f.ProtoInfo.TCP = &conntrack.ProtoInfoTCP{State: 3}
	return f
}

const seen = conntrack.StatusConfirmed | conntrack.StatusSeenReply

func TestFlowScan(t *testing.T) {
	p := &FlowPoller{now: time.Now}
	var got []Reach
	report := func(r Reach) { got = append(got, r) }
	watched := []string{"198.51.100.7:80/tcp"}
	flows := []conntrack.Flow{
		flow(1, "198.51.100.7", 80, seen),
		flow(2, "198.51.100.7", 80, conntrack.StatusConfirmed), // no reply yet
		flow(3, "198.51.100.8", 80, seen),                      // not watched
	}
	rep := p.scan(flows, watched, map[string]bool{}, report)
	if len(got) != 1 || got[0].Target != watched[0] || !strings.Contains(got[0].Detail, "ESTABLISHED") {
		t.Fatalf("reaches %+v", got)
	}
	// The same flow again: not reported, even when no longer watched.
	rep = p.scan(flows, watched, rep, report)
	rep = p.scan(flows, nil, rep, report)
	if len(got) != 1 {
		t.Fatalf("flow reported twice: %+v", got)
	}
	// A new flow to the target is new evidence.
	p.scan(append(flows, flow(4, "198.51.100.7", 80, seen)), watched, rep, report)
	if len(got) != 2 {
		t.Fatalf("new flow not reported: %+v", got)
	}
}

type fakeFlows struct {
	mu    sync.Mutex
	flows []conntrack.Flow
	dumps int
}

func (f *fakeFlows) Dump() ([]conntrack.Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dumps++
	return f.flows, nil
}
func (f *fakeFlows) Close() error { return nil }

// TestFlowPollerRun: nothing watched, no dump; a watched target's flow is
// reported once, at the next poll.
func TestFlowPollerRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeFlows{flows: []conntrack.Flow{flow(1, "198.51.100.7", 80, seen)}}
		const interval = 5 * time.Millisecond
		p := &FlowPoller{Interval: interval, dial: func() (flowSource, error) { return src, nil }, now: time.Now}
		var mu sync.Mutex
		var watch []string
		ctx, cancel := context.WithCancel(t.Context()) // t.Context ends Run if the test fails first
		out := make(chan Reach, 8)
		done := make(chan error)
		go func() {
			done <- p.Run(ctx, func() []string { mu.Lock(); defer mu.Unlock(); return watch }, func(r Reach) { out <- r })
		}()
		time.Sleep(6 * interval)
		synctest.Wait()
		src.mu.Lock()
		if src.dumps != 0 {
			t.Errorf("%d dumps with nothing watched", src.dumps)
		}
		src.mu.Unlock()
		mu.Lock()
		watch = []string{"198.51.100.7:80/tcp"}
		mu.Unlock()
		time.Sleep(interval)
		synctest.Wait()
		select {
		case r := <-out:
			if r.Target != "198.51.100.7:80/tcp" {
				t.Errorf("reach %+v", r)
			}
		default:
			t.Fatal("no reach at the next poll")
		}
		time.Sleep(6 * interval) // several more polls see the same flow
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(out) != 0 {
			t.Fatalf("flow reported again: %+v", <-out)
		}
		if src.dumps < 6 {
			t.Fatalf("%d dumps in 6 polls with a target watched", src.dumps)
		}
	})
}

func TestCounterPoller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		c := netpolicy.Counters{}
		const interval = 5 * time.Millisecond
		p := &CounterPoller{Interval: interval, now: time.Now, read: func(context.Context) (netpolicy.Counters, error) {
			mu.Lock()
			defer mu.Unlock()
			return c, nil
		}}
		ctx, cancel := context.WithCancel(t.Context()) // t.Context ends Run if the test fails first
		out := make(chan CounterMove, 8)
		done := make(chan error)
		go func() { done <- p.Run(ctx, func(m CounterMove) { out <- m }) }()
		time.Sleep(4 * interval)
		synctest.Wait()
		if len(out) != 0 {
			t.Fatal("report without movement")
		}
		mu.Lock()
		c.Allowed = netpolicy.Count{Packets: 3, Bytes: 180}
		mu.Unlock()
		time.Sleep(interval)
		synctest.Wait()
		select {
		case m := <-out:
			if m.Allowed.Packets != 3 || m.Denied.Packets != 0 {
				t.Errorf("move %+v", m)
			}
		default:
			t.Fatal("no move reported at the next poll")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestFlowScanServed: a watched target that opened a flow the container
// answered (a served port's peer) is reached too; the same flow is reported
// once, and an unanswered one not at all.
func TestFlowScanServed(t *testing.T) {
	p := &FlowPoller{now: time.Now}
	var got []Reach
	report := func(r Reach) { got = append(got, r) }
	served := func(id uint32, status conntrack.Status) conntrack.Flow {
		f := conntrack.Flow{ID: id, Status: status}
		f.TupleOrig.IP = conntrack.IPTuple{SourceAddress: netip.MustParseAddr("::ffff:198.51.100.7"), DestinationAddress: netip.MustParseAddr("10.0.0.2")}
		f.TupleOrig.Proto = conntrack.ProtoTuple{Protocol: 17, SourcePort: 5353, DestinationPort: 8080}
		return f
	}
	watched := []string{"198.51.100.7:5353/udp"}
	flows := []conntrack.Flow{served(1, conntrack.StatusConfirmed), served(2, seen)}
	p.Serve = []netpolicy.ServePort{{Proto: 17, Port: 8080}}
	for i := range flows {
		flows[i].Labels = ctLabels(netpolicy.ServeLabel)
	}
	rep := p.scan(flows, watched, map[string]bool{}, report)
	if len(got) != 1 || got[0].Target != watched[0] || !strings.Contains(got[0].Detail, "answered by the container") {
		t.Fatalf("reaches %+v", got)
	}
	p.scan(flows, watched, rep, report)
	if len(got) != 1 {
		t.Fatalf("served flow reported twice: %+v", got)
	}
}

// ctLabels is a conntrack label bitmap as ctnetlink dumps it: the
// kernel's unsigned longs in host byte order, 16 bytes.
func ctLabels(set ...int) []byte {
	b := make([]byte, 16)
	for _, l := range set {
		if bits.UintSize == 64 {
			w := binary.NativeEndian.Uint64(b[l/64*8:])
			binary.NativeEndian.PutUint64(b[l/64*8:], w|1<<(l%64))
		} else {
			w := binary.NativeEndian.Uint32(b[l/32*4:])
			binary.NativeEndian.PutUint32(b[l/32*4:], w|1<<(l%32))
		}
	}
	return b
}

// TestFlowScanScopes: which replied flows to (or from) a watched target are
// the container's. In cgroup scope (a shared namespace) only a flow with
// the own label reached a target for the container: another tenant's flow
// to it, or an entry older than the table, is not (F1). In both scopes a
// watched target's own flow counts as answered by the container only on a
// served port, with the serve label and without the own label: the
// workload connecting from a port it was denied as a target, to an
// allowed or its own served port, is not a peer it answered (F2).
func TestFlowScanScopes(t *testing.T) {
	const (
		own   = netpolicy.OwnLabel
		serve = netpolicy.ServeLabel
	)
	// mk is a replied tcp flow from src to dst with labels (nil: an
	// entry without the labels extension).
	mk := func(id uint32, src, dst string, labels []byte) conntrack.Flow {
		s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
		f := conntrack.Flow{ID: id, Status: seen, Labels: labels}
		f.TupleOrig.IP = conntrack.IPTuple{SourceAddress: s.Addr(), DestinationAddress: d.Addr()}
		f.TupleOrig.Proto = conntrack.ProtoTuple{Protocol: 6, SourcePort: s.Port(), DestinationPort: d.Port()}
		f.ProtoInfo.TCP = &conntrack.ProtoInfoTCP{State: 7} // TIME_WAIT
		return f
	}
	served := []netpolicy.ServePort{{Proto: 6, Port: 7001}}
	watched := []string{"10.0.0.9:8081/tcp", "127.0.0.1:40000/tcp"}
	for _, tc := range []struct {
		name  string
		flow  conntrack.Flow
		scope netpolicy.Scope
		want  string // the target reported, "" for none
	}{
		// Destination side.
		{"cgroup: the container's flow", mk(1, "10.0.0.2:50000", "10.0.0.9:8081", ctLabels(own)), netpolicy.ScopeCgroup, "10.0.0.9:8081/tcp"},
		{"cgroup: the container's flow, other bits too", mk(1, "10.0.0.2:50000", "10.0.0.9:8081", ctLabels(0, own, 100)), netpolicy.ScopeCgroup, "10.0.0.9:8081/tcp"},
		{"cgroup: a host process's flow", mk(1, "10.0.0.2:50000", "10.0.0.9:8081", nil), netpolicy.ScopeCgroup, ""},
		{"cgroup: a host process's flow, labels extension", mk(1, "10.0.0.2:50000", "10.0.0.9:8081", ctLabels()), netpolicy.ScopeCgroup, ""},
		{"cgroup: a flow with other labels", mk(1, "10.0.0.2:50000", "10.0.0.9:8081", ctLabels(serve, 28, 91)), netpolicy.ScopeCgroup, ""},
		{"cgroup: a short bitmap", mk(1, "10.0.0.2:50000", "10.0.0.9:8081", ctLabels(own)[:2]), netpolicy.ScopeCgroup, ""},
		{"netns: any flow", mk(1, "10.0.0.2:50000", "10.0.0.9:8081", nil), netpolicy.ScopeNetns, "10.0.0.9:8081/tcp"},
		{"netns: the container's flow", mk(1, "10.0.0.2:50000", "10.0.0.9:8081", ctLabels(own)), netpolicy.ScopeNetns, "10.0.0.9:8081/tcp"},
		// Source side: a flow the watched target opened.
		{"cgroup: a peer the container answered", mk(1, "127.0.0.1:40000", "127.0.0.1:7001", ctLabels(serve)), netpolicy.ScopeCgroup, "127.0.0.1:40000/tcp"},
		{"netns: a peer the container answered", mk(1, "127.0.0.1:40000", "127.0.0.1:7001", ctLabels(serve)), netpolicy.ScopeNetns, "127.0.0.1:40000/tcp"},
		{"cgroup: F2, the container's allowed connection from the watched port", mk(1, "127.0.0.1:40000", "127.0.0.1:7001", ctLabels(own)), netpolicy.ScopeCgroup, ""},
		{"netns: F2, the container's allowed connection from the watched port", mk(1, "127.0.0.1:40000", "127.0.0.1:7001", ctLabels(own)), netpolicy.ScopeNetns, ""},
		{"netns: F2, no label at all", mk(1, "127.0.0.1:40000", "127.0.0.1:7001", nil), netpolicy.ScopeNetns, ""},
		{"cgroup: the container's connection to its own served port", mk(1, "127.0.0.1:40000", "127.0.0.1:7001", ctLabels(own, serve)), netpolicy.ScopeCgroup, ""},
		{"netns: the container's connection to its own served port", mk(1, "127.0.0.1:40000", "127.0.0.1:7001", ctLabels(own, serve)), netpolicy.ScopeNetns, ""},
		{"cgroup: serve label, port not served", mk(1, "127.0.0.1:40000", "127.0.0.1:7002", ctLabels(serve)), netpolicy.ScopeCgroup, ""},
		{"cgroup: served port, no serve label (not checked, another tenant's)", mk(1, "127.0.0.1:40000", "127.0.0.1:7001", nil), netpolicy.ScopeCgroup, ""},
		{"netns: served port, other protocol", func() conntrack.Flow {
			f := mk(1, "127.0.0.1:40000", "127.0.0.1:7001", ctLabels(serve))
			f.TupleOrig.Proto.Protocol = 17
			f.ProtoInfo.TCP = nil
			return f
		}(), netpolicy.ScopeNetns, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &FlowPoller{now: time.Now, Scope: tc.scope, Serve: served}
			var got []string
			p.scan([]conntrack.Flow{tc.flow}, watched, map[string]bool{}, func(r Reach) { got = append(got, r.Target+" "+r.Detail) })
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("reported %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want+" ")):
				t.Errorf("reported %q, want %s", got, tc.want)
			}
		})
	}
}

// The unlabelled flow is not the container's, whatever the poller saw
// before: F1 as the red team ran it, a host process's connection, then
// its TIME_WAIT entry, then the container's own connection.
func TestFlowScanSharedNetns(t *testing.T) {
	p := &FlowPoller{now: time.Now, Scope: netpolicy.ScopeCgroup}
	var got []Reach
	report := func(r Reach) { got = append(got, r) }
	host := flow(1, "198.51.100.7", 80, seen)
	rep := p.scan([]conntrack.Flow{host}, []string{"198.51.100.7:80/tcp"}, map[string]bool{}, report)
	host.ProtoInfo.TCP.State = 7
	rep = p.scan([]conntrack.Flow{host}, []string{"198.51.100.7:80/tcp"}, rep, report)
	if len(got) != 0 || len(rep) != 0 {
		t.Fatalf("a host process's flow reported: %+v", got)
	}
	ctr := flow(2, "198.51.100.7", 80, seen)
	ctr.Labels = ctLabels(netpolicy.OwnLabel)
	p.scan([]conntrack.Flow{host, ctr}, []string{"198.51.100.7:80/tcp"}, rep, report)
	if len(got) != 1 || !strings.Contains(got[0].Detail, fmt.Sprintf("port %d", ctr.TupleOrig.Proto.SourcePort)) {
		t.Fatalf("the container's flow: reported %+v", got)
	}
}
