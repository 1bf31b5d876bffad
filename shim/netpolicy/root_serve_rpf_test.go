package netpolicy

// Root tests of the served ports' reverse-path check: a datagram with a
// forged source D sent to a served UDP port must not make the workload
// exchange datagrams with D, over IPv4 and IPv6, in both scopes; genuine
// peers on either interface still get their answers. The test then deletes
// the input chain's drops and shows the bypass they close is real.
// TestRootServeBeforeBind: a datagram forged before the workload binds the
// port meets no socket of the cgroup; its flow is never labelled, and the
// workload cannot answer on it.

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
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
	ns *kerneltest.Netns
	heard
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
	f.listen(t, pc)
	return f
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
	if got := far.quiet(); len(got) > 0 {
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

	// Control: without the input chain's drops the same datagrams make
	// the workload answer D on both families (the label rule stays: it
	// now labels the forged flows too).
	deleteRules(t, tp, p, "input", `served ports, (?:source not routed back|non-local source over loopback)`)
	forge(t, tp)
	want := []string{farLocal4 + ":8080", "[" + farLocal6 + "]:8080"}
	got := far.await(want...)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Logf("counters: %+v; flows %+v", countersT(t, tp, p), flowsWith(t, tp, farD4))
		t.Errorf("control without the check: D received from %v, want %v (the bypass the check closes)", got, want)
	}
}

// deleteRules deletes the rules of chain whose comment matches re.
func deleteRules(t *testing.T, tp *topology, p *Plan, chain, re string) {
	t.Helper()
	out := tp.client.Nft(t, "-a", "list", "chain", "inet", p.Table, chain)
	hs := regexp.MustCompile(`comment "gensee: (?:`+re+`)[^"]*" # handle (\d+)`).FindAllStringSubmatch(out, -1)
	if len(hs) == 0 {
		t.Fatalf("no rule matching %q in\n%s", re, out)
	}
	for _, h := range hs {
		tp.client.Nft(t, "delete", "rule", "inet", p.Table, chain, "handle", h[1])
	}
}

// peerUDPFrom sends one datagram from local in namespace n to addr and
// waits for its echo: a peer that keeps its source port across attempts.
func peerUDPFrom(n *kerneltest.Netns, local, addr string) error {
	return n.Do(func() error {
		la, err := net.ResolveUDPAddr("udp", local)
		if err != nil {
			return err
		}
		ra, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		c, err := net.DialUDP("udp", la, ra)
		if err != nil {
			return err
		}
		defer c.Close()
		return echo(c, []byte("gensee-served-udp"), time.Now().Add(1500*time.Millisecond))
	})
}

// forgedFlows is the conntrack entries of the forged datagrams (from D's
// port farDPort), both families, and whether any carries the serve label.
func forgedFlows(t *testing.T, tp *topology) (n int, labelled bool) {
	t.Helper()
	for _, d := range []string{farD4, farD6} {
		for _, fl := range flowsWith(t, tp, d) {
			if fl.TupleOrig.Proto.SourcePort == farDPort {
				n++
				labelled = labelled || hasServeLabel(fl.Labels)
			}
		}
	}
	return n, labelled
}

func hasServeLabel(l []byte) bool {
	want := labelBits()
	for i := range want {
		if i < len(l) && l[i]&want[i] != 0 {
			return true
		}
	}
	return false
}

// The red team's bypass: in cgroup scope the reverse-path check sees only
// packets whose socket is the cgroup's, so a datagram forged from D to the
// served port before the workload binds it passes and leaves a conntrack
// entry. The workload then binds the port and sends to D from it: on the
// reply direction of that entry, which the served accept took for an
// answer. Now the flow carries no serve label and the send is denied; a
// genuine peer that sent before the bind is answered once it retries; and
// the served accept as it was before the label (the control) lets the
// workload reach D on the same entries.
func TestRootServeBeforeBind(t *testing.T) {
	roottest.Require(t)
	for _, scope := range []Scope{ScopeCgroup, ScopeNetns} {
		t.Run(string(scope), func(t *testing.T) { testServeBeforeBind(t, scope) })
	}
}

func testServeBeforeBind(t *testing.T, scope Scope) {
	tp := newTopology(t)
	far := newFarPeer(t, tp)
	n := spec.Network{Mode: spec.NetworkDenyAll, Serve: []spec.ServeRule{{Proto: "udp", Port: 8080}}}
	p := scopedPlanT(t, tp, "op-bind-", n, scope)
	genuine := []string{farLocal4 + ":8080", "[" + farLocal6 + "]:8080"}

	// Before any socket is bound to the served port: the forged
	// datagrams, and a genuine peer (D's address, its own port 6000)
	// that gets no answer (port unreachable). The attacker resolves its
	// neighbour first: a forged IPv6 datagram queued behind a neighbour
	// solicitation from a source it does not own can be lost.
	warmNeighbors(t, tp)
	forge(t, tp)
	for _, a := range genuine {
		if err := peerUDPFrom(far.ns, ":6000", a); err == nil {
			t.Fatalf("genuine peer %s answered before anything listens", a)
		}
	}
	c0 := countersT(t, tp, p)
	t.Logf("counters after forging before the bind: %+v", c0)
	flows, labelled := forgedFlows(t, tp)
	switch scope {
	case ScopeCgroup:
		// No socket received them: the cgroup's input rules skipped
		// them, and conntrack holds both flows, unlabelled.
		if flows != 2 || labelled || c0.ServedSpoofed != (Count{}) {
			t.Fatalf("forged before the bind: %d flows (labelled %v), served_spoofed %+v; want 2 unlabelled flows, nothing dropped", flows, labelled, c0.ServedSpoofed)
		}
	case ScopeNetns:
		// Every packet to a served port is checked: dropped, no flow.
		if flows != 0 || c0.ServedSpoofed.Packets != 2 {
			t.Fatalf("forged before the bind: %d flows, served_spoofed %+v; want none, 2 dropped", flows, c0.ServedSpoofed)
		}
	}

	// The workload binds the served port and sends to D from it, on the
	// forged entries' reply direction: denied, D hears nothing.
	send := func() {
		for _, d := range []string{farD4 + ":5353", "[" + farD6 + "]:5353"} {
			probe(t, tp.h, tp.ctr, tp.client, "udp@:8080", d) // D never echoes: the error is expected
		}
	}
	send()
	if got := far.quiet(); len(got) > 0 {
		t.Errorf("the workload reached D from the served port on a flow forged before the bind: D received from %v", got)
	}
	c1 := countersT(t, tp, p)
	t.Logf("counters after the workload's sends: %+v", c1)
	if c1.Denied.Packets-c0.Denied.Packets != 2 || c1.Served != c0.Served {
		t.Errorf("the workload's sends to D: denied %+v → %+v (want 2 more), served %+v → %+v (want unchanged)", c0.Denied, c1.Denied, c0.Served, c1.Served)
	}

	// A genuine peer that sent before the bind is answered when it
	// retries, from the same port (the same conntrack entry, now
	// labelled by its retry).
	srv := startServerKind(t, tp.h, tp.ctr, tp.client, "serve-udp", ":8080")
	for _, a := range genuine {
		if err := peerUDPFrom(far.ns, ":6000", a); err != nil {
			t.Errorf("genuine peer %s retrying after the bind: %v", a, err)
		}
	}
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}
	if scope != ScopeCgroup {
		return
	}

	// Control: the served reply accept as it was before the label (no
	// `ct label`) lets the workload reach D on the same forged entries.
	srv.Process.Kill()
	srv.Wait()
	if flows, labelled := forgedFlows(t, tp); flows != 2 || labelled {
		t.Fatalf("before the control: %d forged flows (labelled %v), want 2 unlabelled", flows, labelled)
	}
	unlabelServeRules(t, tp, p)
	send()
	got := far.await(genuine...)
	slices.Sort(got)
	if want := []string{farLocal4 + ":8080", "[" + farLocal6 + "]:8080"}; !slices.Equal(got, want) {
		t.Errorf("control without the label: D received from %v, want %v (the bypass the label closes)", got, want)
	}
}

// warmNeighbors has the server namespace resolve the client's addresses on
// their shared link (one datagram each to a port nothing listens on), and
// waits, at most 5 s, until both neighbour entries have a link-layer
// address.
func warmNeighbors(t *testing.T, tp *topology) {
	t.Helper()
	addrs := []string{"192.0.2.1", "2001:db8::1"}
	if err := tp.server.Do(func() error {
		for _, a := range addrs {
			c, err := net.Dial("udp", net.JoinHostPort(a, "9"))
			if err != nil {
				return err
			}
			c.Write([]byte("gensee-warm"))
			c.Close()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			out := kerneltest.Run(t, "ip", "-n", tp.server.Name, "neigh", "show", "to", a)
			if strings.Contains(out, " lladdr ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server namespace did not resolve %s: %q", a, out)
			}
		}
	}
}

// unlabelServeRules replaces every rule of the output chain that requires
// the serve label with the same rule without it: the serve accepts (and
// their counting twins) as they were before the label.
func unlabelServeRules(t *testing.T, tp *topology, p *Plan) {
	t.Helper()
	label := fmt.Sprintf("ct label %d ", serveLabel)
	out := tp.client.Nft(t, "-a", "list", "chain", "inet", p.Table, "output")
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^\s*(.*`+label+`.*) # handle (\d+)$`).FindAllStringSubmatch(out, -1) {
		tp.client.Nft(t, "replace", "rule", "inet", p.Table, "output", "handle", m[2], strings.Replace(m[1], label, "", 1))
		n++
	}
	if n == 0 {
		t.Fatalf("no rule requires the serve label in\n%s", out)
	}
	if after := tp.client.Nft(t, "list", "chain", "inet", p.Table, "output"); strings.Contains(after, label) {
		t.Fatalf("the serve label is still required:\n%s", after)
	}
}

// Another cgroup of a shared namespace forges R's source towards the
// workload's bound served port over lo. The input chain drops the datagram
// (served_spoofed), but a local packet's conntrack entry is confirmed at
// output, before the input chain sees it: the entry outlives the drop.
// Only the label keeps the workload from answering R on it; the control
// shows the serve accepts without it did.
func TestRootServeLoopbackForgedOutside(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	world := newWorldReceiver(t, tp)
	n := spec.Network{Mode: spec.NetworkDenyAll, Serve: []spec.ServeRule{{Proto: "udp", Port: 8082}}}
	p := scopedPlanT(t, tp, "op-lofo-", n, ScopeCgroup)
	srv := startServerKind(t, tp.h, tp.ctr, tp.client, "serve-udp", ":8082")

	c0 := countersT(t, tp, p)
	tp.spoof(t, tp.other, "["+spoofR6+"]:7777>[2001:db8::1]:8082,"+spoofR4+":7777>192.0.2.1:8082")
	c1 := countersT(t, tp, p)
	if c1.ServedSpoofed.Packets-c0.ServedSpoofed.Packets != 2 {
		t.Errorf("served_spoofed %+v → %+v, want 2 more", c0.ServedSpoofed, c1.ServedSpoofed)
	}
	entries := 0
	for _, r := range []string{spoofR6, spoofR4} {
		for _, fl := range flowsWith(t, tp, r) {
			entries++
			if hasServeLabel(fl.Labels) {
				t.Errorf("the forged flow is labelled: %+v", fl)
			}
		}
	}
	if entries != 2 {
		t.Fatalf("conntrack entries of the dropped forged datagrams: %d, want 2 (confirmed at output)", entries)
	}

	// The workload binds the port and answers R on those entries.
	srv.Process.Kill()
	srv.Wait()
	send := func() {
		for _, r := range []string{"[" + spoofR6 + "]:7777", spoofR4 + ":7777"} {
			probe(t, tp.h, tp.ctr, tp.client, "udp@:8082", r) // R never echoes
		}
	}
	send()
	if got := world.quiet(); len(got) > 0 {
		t.Errorf("the workload answered the forged R: R heard %v", got)
	}
	if c2 := countersT(t, tp, p); c2.Denied.Packets-c1.Denied.Packets != 2 || c2.Served != c1.Served {
		t.Errorf("counters %+v → %+v: want 2 more denied, nothing served", c1, c2)
	}
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}

	// Control: the serve accepts without the label.
	unlabelServeRules(t, tp, p)
	send()
	want := []string{"192.0.2.1:8082", "[2001:db8::1]:8082"}
	got := world.await(want...)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("control without the label: R heard %v, want %v", got, want)
	}
}
