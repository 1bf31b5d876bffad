package netpolicy

// Root tests of the served ports' reverse-path check: a datagram with a
// forged source D sent to a served UDP port must not make the workload
// exchange datagrams with D, over IPv4 and IPv6, in both scopes; genuine
// peers on either interface still get their answers. The test then flushes
// the input chain and shows the bypass it closes is real.

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/pktprobe"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// The far peer D: a third namespace behind a second interface of the
// container's namespace. The attacker (the server namespace) forges D's
// address towards the container's first interface.
const (
	farD4     = "198.51.100.7"
	farD6     = "2001:db8:2::7"
	farDPort  = 5353
	farLocal4 = "198.51.100.1"
	farLocal6 = "2001:db8:2::1"
)

// farPeer records the sources of every datagram reaching udp port farDPort
// in the far namespace.
type farPeer struct {
	ns   *kerneltest.Netns
	mu   sync.Mutex
	from []string
}

func newFarPeer(t *testing.T, tp *topology) *farPeer {
	t.Helper()
	f := &farPeer{ns: kerneltest.NewNetns(t)}
	veth := "gf" + kerneltest.RandHex(4)
	kerneltest.Run(t, "ip", "link", "add", veth+"c", "netns", tp.client.Name, "type", "veth", "peer", "name", veth+"f", "netns", f.ns.Name)
	for _, c := range [][]string{
		{"-n", tp.client.Name, "addr", "add", farLocal4 + "/24", "dev", veth + "c"},
		{"-n", tp.client.Name, "addr", "add", farLocal6 + "/64", "dev", veth + "c", "nodad"},
		{"-n", tp.client.Name, "link", "set", veth + "c", "up"},
		{"-n", f.ns.Name, "addr", "add", farD4 + "/24", "dev", veth + "f"},
		{"-n", f.ns.Name, "addr", "add", farD6 + "/64", "dev", veth + "f", "nodad"},
		{"-n", f.ns.Name, "link", "set", veth + "f", "up"},
	} {
		kerneltest.Run(t, "ip", c...)
	}
	kerneltest.Run(t, "ip", "-n", tp.server.Name, "route", "add", "198.51.100.0/24", "via", "192.0.2.1")
	kerneltest.Run(t, "ip", "-n", tp.server.Name, "-6", "route", "add", "2001:db8:2::/64", "via", "2001:db8::1")
	// The kernel's own IPv4 reverse-path filter would hide what the table
	// does: off, as on most container hosts' pod interfaces.
	if err := tp.client.Do(func() error {
		for _, dev := range []string{"all", "default", veth + "c", vethOf(t, tp.client)} {
			if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/rp_filter", []byte("0"), 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var pc net.PacketConn
	if err := f.ns.Do(func() (err error) { pc, err = net.ListenPacket("udp", ":5353"); return }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			a := from.(*net.UDPAddr).AddrPort()
			f.mu.Lock()
			f.from = append(f.from, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()).String())
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return f
}

func (f *farPeer) take() []string {
	time.Sleep(300 * time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.from
	f.from = nil
	return got
}

// forge sends one datagram from D to the container's served port from the
// server namespace, once per family (pktprobe.SpoofOne: IP_TRANSPARENT for IPv4,
// IPV6_FREEBIND for IPv6, as root in the test's own namespace). It is
// addressed to the container's address on D's side, which the server
// namespace routes through the container's first interface: an unbound
// server's answer then leaves from the address the flow expects.
func forge(t *testing.T, tp *topology) {
	t.Helper()
	for _, step := range [][2]string{
		{farD4 + ":5353", farLocal4 + ":8080"},
		{"[" + farD6 + "]:5353", "[" + farLocal6 + "]:8080"},
	} {
		src, dst := netip.MustParseAddrPort(step[0]), netip.MustParseAddrPort(step[1])
		if err := tp.server.Do(func() error { return pktprobe.SpoofOne(src, dst) }); err != nil {
			t.Fatalf("forge %s > %s: %v", src, dst, err)
		}
	}
}

func TestRootServeReversePath(t *testing.T) {
	roottest.Require(t)
	for _, scope := range []Scope{ScopeCgroup, ScopeNetns} {
		t.Run(string(scope), func(t *testing.T) { testServeReversePath(t, scope) })
	}
}

func testServeReversePath(t *testing.T, scope Scope) {
	tp := newTopology(t)
	far := newFarPeer(t, tp)
	n := spec.Network{Mode: spec.NetworkDenyAll, Serve: []spec.ServeRule{{Proto: "udp", Port: 8080}}}
	p := scopedPlanT(t, tp, "op-rpf-", n, scope)
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-udp", ":8080")

	// Genuine peers on both interfaces, both families, are answered.
	for _, c := range []struct {
		ns   *kerneltest.Netns
		addr string
	}{
		{tp.server, "192.0.2.1:8080"}, {tp.server, "[2001:db8::1]:8080"},
		{far.ns, farLocal4 + ":8080"}, {far.ns, "[" + farLocal6 + "]:8080"},
	} {
		if err := peerUDP(c.ns, c.addr); err != nil {
			t.Errorf("genuine peer %s in %s: %v", c.addr, c.ns.Name, err)
		}
	}
	c0 := countersT(t, tp, p)
	if c0.ServedSpoofed != (Count{}) || c0.Served.Packets < 4 {
		t.Fatalf("after genuine peers: %+v; want served >= 4, served_spoofed 0", c0)
	}

	// The forged datagrams: D never hears from the workload, no flow
	// names D, and the input chain counted both.
	forge(t, tp)
	if got := far.take(); len(got) > 0 {
		t.Errorf("the workload answered the forged peer: D received from %v", got)
	}
	for _, d := range []string{farD4, farD6} {
		for _, fl := range flowsWith(t, tp, d) {
			if fl.TupleOrig.Proto.SourcePort == farDPort {
				t.Errorf("conntrack holds a flow from forged %s: %+v", d, fl)
			}
		}
	}
	c1 := countersT(t, tp, p)
	t.Logf("counters after forging: %+v", c1)
	if c1.ServedSpoofed.Packets != 2 || c1.Served != c0.Served {
		t.Errorf("after forging: served_spoofed %+v (want 2 packets), served %+v → %+v (want unchanged)", c1.ServedSpoofed, c0.Served, c1.Served)
	}
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}
	// Genuine peers are still answered afterwards.
	if err := peerUDP(tp.server, "192.0.2.1:8080"); err != nil {
		t.Errorf("genuine peer after forging: %v", err)
	}

	// Control: without the input chain's rules the same datagrams make
	// the workload answer D on both families.
	tp.client.Nft(t, "flush", "chain", "inet", p.Table, "input")
	forge(t, tp)
	got := far.take()
	slices.Sort(got)
	want := []string{farLocal4 + ":8080", "[" + farLocal6 + "]:8080"}
	if !slices.Equal(got, want) {
		t.Logf("counters: %+v; flows %+v", countersT(t, tp, p), flowsWith(t, tp, farD4))
		t.Errorf("control without the check: D received from %v, want %v (the bypass the check closes)", got, want)
	}
}
