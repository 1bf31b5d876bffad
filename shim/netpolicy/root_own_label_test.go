package netpolicy

// Root test of the own label (ownLabel, conntrack label 27): the output
// chain's first rule labels the flows the cgroup's sockets open, so the
// flow sensor can tell them from another tenant's in a shared namespace
// and from a peer's flow to a served port.

import (
	"net/netip"
	"testing"

	"github.com/ti-mo/conntrack"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

func TestRootOwnLabel(t *testing.T) {
	roottest.Require(t)
	for _, scope := range []Scope{ScopeCgroup, ScopeNetns} {
		t.Run(string(scope), func(t *testing.T) { testOwnLabel(t, scope) })
	}
}

func testOwnLabel(t *testing.T, scope Scope) {
	tp := newTopology(t)
	n := spec.Network{
		Mode:  spec.NetworkAllowExact,
		Allow: []spec.AllowRule{{IP: "192.0.2.2", Proto: spec.ProtoTCP, Port: 8080}},
		Serve: []spec.ServeRule{{Proto: "udp", Port: 8083}},
	}
	p := scopedPlanT(t, tp, "op-own-", n, scope)
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-udp", ":8083")

	// The container's connection (its child cgroup's too), allowed;
	// another cgroup's to the same target (cgroup scope: policy accept;
	// netns scope: the outside accepts); the container's denied attempt
	// (no flow: a dropped packet never confirms its entry); a peer's
	// flow to the served port, answered by the container.
	if err := probe(t, tp.h, tp.ctr, tp.client, "tcp@:40101", "192.0.2.2:8080"); err != nil {
		t.Fatalf("the container's allowed connection: %v", err)
	}
	if err := probe(t, tp.h, tp.ctrChild, tp.client, "tcp@:40102", "192.0.2.2:8080"); err != nil {
		t.Fatalf("the container's child cgroup's allowed connection: %v", err)
	}
	if err := probe(t, tp.h, tp.other, tp.client, "tcp@:40103", "192.0.2.2:8080"); err != nil {
		t.Fatalf("another cgroup's connection: %v", err)
	}
	if err := probe(t, tp.h, tp.ctr, tp.client, "tcp@:40104", "192.0.2.2:8081"); err == nil {
		t.Fatal("the container's connection to a target not allowed succeeded")
	}
	if err := peerUDP(tp.server, "192.0.2.1:8083"); err != nil {
		t.Fatalf("peer of the served port: %v", err)
	}

	byPort := map[uint16]conntrack.Flow{}
	var served []conntrack.Flow
	for _, f := range flowsWith(t, tp, "192.0.2.2") {
		o := f.TupleOrig
		switch {
		case o.IP.SourceAddress == netip.MustParseAddr("192.0.2.1"):
			byPort[o.Proto.SourcePort] = f
		case o.Proto.DestinationPort == 8083:
			served = append(served, f)
		}
	}
	t.Logf("flows: %+v; served %+v", byPort, served)
	for _, port := range []uint16{40101, 40102} {
		f, ok := byPort[port]
		if !ok || !f.Status.SeenReply() {
			t.Errorf("the container's flow from port %d: %+v (found %v), want a replied flow", port, f, ok)
		} else if !HasLabel(f.Labels, OwnLabel) || HasLabel(f.Labels, ServeLabel) {
			t.Errorf("the container's flow from port %d has labels %x, want the own label only", port, f.Labels)
		}
	}
	// Not the cgroup's: unlabelled in both scopes (in netns scope the
	// flow sensor takes every flow for the container's anyway).
	if f, ok := byPort[40103]; !ok || !f.Status.SeenReply() {
		t.Errorf("another cgroup's flow: %+v (found %v), want a replied flow", f, ok)
	} else if HasLabel(f.Labels, OwnLabel) {
		t.Errorf("another cgroup's flow carries the own label: %x", f.Labels)
	}
	if f, ok := byPort[40104]; ok {
		t.Errorf("the denied attempt left a flow: %+v", f)
	}
	if len(served) != 1 || !served[0].Status.SeenReply() || HasLabel(served[0].Labels, OwnLabel) || !HasLabel(served[0].Labels, ServeLabel) {
		t.Errorf("the peer's served flow: %+v, want one answered, the serve label only", served)
	}
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}
}

// HasLabel reads the bitmap as labelBitsOf writes it.
func TestHasLabel(t *testing.T) {
	for _, bit := range []int{0, 26, 27, 63, 64, 127} {
		b := labelBitsOf(bit)
		for _, other := range []int{0, 26, 27, 63, 64, 127} {
			if got := HasLabel(b, other); got != (other == bit) {
				t.Errorf("HasLabel(bits of %d, %d) = %v", bit, other, got)
			}
		}
	}
	if HasLabel(nil, 27) || HasLabel(labelBitsOf(27)[:2], 27) || HasLabel(labelBitsOf(128), 0) {
		t.Error("a short or empty bitmap has a label")
	}
	if !HasLabel(label27, ownLabel) || !HasLabel(label26, serveLabel) {
		t.Error("nft(8)'s bitmaps do not read as the labels")
	}
}
