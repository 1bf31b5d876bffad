package evidence

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
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
// reported once.
func TestFlowPollerRun(t *testing.T) {
	src := &fakeFlows{flows: []conntrack.Flow{flow(1, "198.51.100.7", 80, seen)}}
	p := &FlowPoller{Interval: 5 * time.Millisecond, dial: func() (flowSource, error) { return src, nil }, now: time.Now}
	var mu sync.Mutex
	var watch []string
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Reach, 8)
	done := make(chan error)
	go func() {
		done <- p.Run(ctx, func() []string { mu.Lock(); defer mu.Unlock(); return watch }, func(r Reach) { out <- r })
	}()
	time.Sleep(30 * time.Millisecond)
	src.mu.Lock()
	if src.dumps != 0 {
		t.Errorf("%d dumps with nothing watched", src.dumps)
	}
	src.mu.Unlock()
	mu.Lock()
	watch = []string{"198.51.100.7:80/tcp"}
	mu.Unlock()
	select {
	case r := <-out:
		if r.Target != "198.51.100.7:80/tcp" {
			t.Errorf("reach %+v", r)
		}
	case <-time.After(time.Second):
		t.Fatal("no reach")
	}
	time.Sleep(30 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(out) != 0 {
		t.Fatalf("flow reported again: %+v", <-out)
	}
}

func TestCounterPoller(t *testing.T) {
	var mu sync.Mutex
	c := netpolicy.Counters{}
	p := &CounterPoller{Interval: 5 * time.Millisecond, now: time.Now, read: func(context.Context) (netpolicy.Counters, error) {
		mu.Lock()
		defer mu.Unlock()
		return c, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan CounterMove, 8)
	done := make(chan error)
	go func() { done <- p.Run(ctx, func(m CounterMove) { out <- m }) }()
	time.Sleep(20 * time.Millisecond)
	if len(out) != 0 {
		t.Fatal("report without movement")
	}
	mu.Lock()
	c.Allowed = netpolicy.Count{Packets: 3, Bytes: 180}
	mu.Unlock()
	select {
	case m := <-out:
		if m.Allowed.Packets != 3 || m.Denied.Packets != 0 {
			t.Errorf("move %+v", m)
		}
	case <-time.After(time.Second):
		t.Fatal("no move reported")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
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
	rep := p.scan(flows, watched, map[string]bool{}, report)
	if len(got) != 1 || got[0].Target != watched[0] || !strings.Contains(got[0].Detail, "answered by the container") {
		t.Fatalf("reaches %+v", got)
	}
	p.scan(flows, watched, rep, report)
	if len(got) != 1 {
		t.Fatalf("served flow reported twice: %+v", got)
	}
}
