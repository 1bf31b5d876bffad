package netpolicy

// Root tests of the non-local source drop: a workload that binds a foreign
// source address (IPV6_FREEBIND) cannot answer as an allowed tuple or a
// served port to anyone, in either scope; what legitimately leaves keeps
// leaving. Each test then deletes the non-local source rules and shows the
// bypass they close is real.

import (
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// Addresses of the world (the server namespace): A is the allowed peer,
// R the attacker's receiver; both answer nothing on R's port but record it.
const (
	spoofA6 = "2001:db8::2"
	spoofR6 = "2001:db8:1::3" // off the shared /64: never the world's source towards the client
	spoofA4 = "192.0.2.2"
	spoofR4 = "192.0.2.3"
)

// worldReceiver records every datagram that reaches udp port 7777 in the
// server namespace (R, both families).
type worldReceiver struct{ heard }

func newWorldReceiver(t *testing.T, tp *topology) *worldReceiver {
	t.Helper()
	veth := vethOf(t, tp.server)
	kerneltest.Run(t, "ip", "-n", tp.server.Name, "addr", "add", spoofR6+"/64", "dev", veth, "nodad")
	kerneltest.Run(t, "ip", "-n", tp.client.Name, "-6", "route", "add", spoofR6+"/64", "via", spoofA6)
	// A and R are both the world's: let it take packets from its own
	// address (A, sent by the spoofing workload) over the wire.
	if err := tp.server.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/conf/"+veth+"/accept_local", []byte("1"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	var pc net.PacketConn
	if err := tp.server.Do(func() (err error) { pc, err = net.ListenPacket("udp", ":7777"); return }); err != nil {
		t.Fatal(err)
	}
	w := &worldReceiver{}
	w.listen(t, pc)
	return w
}

func vethOf(t *testing.T, n *kerneltest.Netns) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\d+: ([^@:]+)@`).FindStringSubmatch(kerneltest.Run(t, "ip", "-n", n.Name, "-o", "link", "show", "type", "veth"))
	if m == nil {
		t.Fatalf("no veth in %s", n.Name)
	}
	return m[1]
}

// spoof runs the spoofing probe with steps from cgroup cg.
func (tp *topology) spoof(t *testing.T, cg, steps string) {
	t.Helper()
	cmd, err := probeCmd(t, tp.h, cg, tp.client, "spoof", steps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("spoof %s from %s: %v: %s", steps, cg, err, out)
	}
	t.Logf("spoof from %s:\n%s", cg, strings.TrimSpace(string(out)))
}

// flowsWith lists the conntrack entries of the client namespace that name
// address a.
func flowsWith(t *testing.T, tp *topology, a string) []conntrack.Flow {
	t.Helper()
	addr := netip.MustParseAddr(a)
	c, err := conntrack.Dial(&netlink.Config{NetNS: tp.client.FD})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fs, err := c.Dump(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []conntrack.Flow
	for _, f := range fs {
		if f.TupleOrig.IP.SourceAddress == addr || f.TupleOrig.IP.DestinationAddress == addr {
			out = append(out, f)
		}
	}
	return out
}

// removeSpoofRules deletes every non-local source rule (and the duplicate
// address detection exemption): the table as it was before them.
func removeSpoofRules(t *testing.T, tp *topology, p *Plan) {
	t.Helper()
	out := tp.client.Nft(t, "-a", "list", "chain", "inet", p.Table, "output")
	hs := regexp.MustCompile(`comment "gensee: (?:log non-local source|deny non-local source|icmpv6 duplicate address)[^"]*" # handle (\d+)`).FindAllStringSubmatch(out, -1)
	if len(hs) == 0 {
		t.Fatalf("no non-local source rules in\n%s", out)
	}
	for _, h := range hs {
		tp.client.Nft(t, "delete", "rule", "inet", p.Table, "output", "handle", h[1])
	}
}

func spoofScopes(t *testing.T, run func(t *testing.T, scope Scope, kernelInCtr bool)) {
	for _, tc := range []struct {
		name        string
		scope       Scope
		kernelInCtr bool
	}{
		// runc makes the namespace inside the container's cgroup: its
		// neighbor discovery (DAD included) is the cgroup's, and meets the
		// cgroup's rules.
		{"cgroup", ScopeCgroup, true},
		// A namespace made outside: neighbor discovery meets the outside
		// rules.
		{"netns", ScopeNetns, false},
	} {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.scope, tc.kernelInCtr) })
	}
}

// Attack (a): allow_exact with A:53/udp. A socket bound to R:7777 sends to
// A:53 (conntrack: R → A), then one bound to A:53 sends to R:7777: the
// reply direction of that flow, from an allowed tuple. Without the
// non-local source drop both pass and R hears from "A".
func TestRootSpoofTupleReplies(t *testing.T) {
	roottest.Require(t)
	spoofScopes(t, testSpoofTupleReplies)
}

func testSpoofTupleReplies(t *testing.T, scope Scope, kernelInCtr bool) {
	tp := newTopologyOpt(t, kernelInCtr)
	world := newWorldReceiver(t, tp)
	n := spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{
		{IP: spoofA6, Proto: "udp", Port: 53}, {IP: spoofA4, Proto: "udp", Port: 53},
		{IP: spoofA6, Proto: "udp", Port: 8080}, {IP: spoofA4, Proto: "udp", Port: 8080},
	}}
	p := scopedPlanT(t, tp, "op-spoofa-", n, scope)
	attack := "[" + spoofR6 + "]:7777>[" + spoofA6 + "]:53,[" + spoofA6 + "]:53>[" + spoofR6 + "]:7777," +
		spoofR4 + ":7777>" + spoofA4 + ":53," + spoofA4 + ":53>" + spoofR4 + ":7777"

	c0 := countersT(t, tp, p)
	tp.spoof(t, tp.ctr, attack)
	if got := world.quiet(); len(got) != 0 {
		t.Errorf("R heard %v: the spoofed replies left", got)
	}
	c1 := countersT(t, tp, p)
	// Exactly the workload's four in denied; spoofed may also count the
	// kernel's multicast listener reports from :: (link-local address
	// still tentative), never accepted anyway.
	if c1.Spoofed.Packets-c0.Spoofed.Packets < 4 || c1.Denied.Packets-c0.Denied.Packets != 4 {
		t.Errorf("counters %+v → %+v; want 4 more spoofed, 4 more denied", c0, c1)
	}
	for _, r := range []string{spoofR6, spoofR4} {
		if fs := flowsWith(t, tp, r); len(fs) != 0 {
			t.Errorf("a dropped spoofed packet left conntrack entries with %s: %+v", r, fs)
		}
	}

	// The reply rule is guarded even where the flow exists: make the
	// entries the first steps would have made, then send the answers alone.
	ct, err := conntrack.Dial(&netlink.Config{NetNS: tp.client.FD})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	for _, ar := range [][2]string{{spoofR6, spoofA6}, {spoofR4, spoofA4}} {
		f := conntrack.NewFlow(ProtoUDP, 0, netip.MustParseAddr(ar[0]), netip.MustParseAddr(ar[1]), 7777, 53, 60, 0)
		if err := ct.Create(f); err != nil {
			t.Fatalf("create conntrack entry %s:7777 → %s:53: %v", ar[0], ar[1], err)
		}
	}
	tp.spoof(t, tp.ctr, "["+spoofA6+"]:53>["+spoofR6+"]:7777,"+spoofA4+":53>"+spoofR4+":7777")
	if got := world.quiet(); len(got) != 0 {
		t.Errorf("R heard %v over an existing flow", got)
	}
	c2 := countersT(t, tp, p)
	if c2.Spoofed.Packets-c1.Spoofed.Packets < 2 || c2.Denied.Packets-c1.Denied.Packets != 2 {
		t.Errorf("counters %+v → %+v; want 2 more spoofed and denied", c1, c2)
	}
	if err := ct.Flush(); err != nil {
		t.Fatal(err)
	}

	// What is allowed still leaves: the tuples, over fresh neighbor
	// discovery (nothing has resolved A yet but the dropped attempts).
	tp.expect(t,
		probeCase{tp.ctr, "udp", "[" + spoofA6 + "]:8080", true},
		probeCase{tp.ctr, "udp", spoofA4 + ":8080", true},
		probeCase{tp.ctr, "udp", "[" + spoofR6 + "]:8080", false},
	)

	spoofEpilogue(t, tp, p, world, scope, attack, 4, "["+spoofA6+"]:53", spoofA4+":53")
}

// spoofEpilogue ends both attacks. In netns scope another cgroup's
// spoofing meets the outside copy: R hears nothing, at least minSpoofed
// more spoofed and 4 more denied_outside, denied unchanged. Duplicate
// address detection leaves from ::: the world owns 2001:db8::5 and answers
// the probe, so the client's copy fails DAD. The table still reads back.
// Without the non-local source rules the bypass is real: R hears every
// source of bypass.
func spoofEpilogue(t *testing.T, tp *topology, p *Plan, world *worldReceiver, scope Scope, attack string, minSpoofed uint64, bypass ...string) {
	t.Helper()
	if scope == ScopeNetns {
		c2 := countersT(t, tp, p)
		tp.spoof(t, tp.other, attack)
		if got := world.quiet(); len(got) != 0 {
			t.Errorf("R heard %v from another cgroup", got)
		}
		c3 := countersT(t, tp, p)
		if c3.Spoofed.Packets-c2.Spoofed.Packets < minSpoofed || c3.DeniedOutside.Packets-c2.DeniedOutside.Packets < 4 || c3.Denied != c2.Denied {
			t.Errorf("counters %+v → %+v; want %d more spoofed, 4 more denied_outside, denied unchanged", c2, c3, minSpoofed)
		}
	}
	testDAD(t, tp, p, scope)
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}
	t.Logf("counters: %+v", countersT(t, tp, p))

	removeSpoofRules(t, tp, p)
	if len(p.Serve) > 0 {
		// Attack (b) answers on a flow that over lo conntrack
		// confirmed at output, before the input chain saw it: not
		// labelled, so the serve accepts refuse it too. Without the
		// label requirement as well, the non-local source rules alone
		// stood between R and the workload.
		unlabelServeRules(t, tp, p)
	}
	tp.spoof(t, tp.ctr, attack)
	got := strings.Join(world.await(bypass...), " ")
	for _, want := range bypass {
		if !strings.Contains(got, want) {
			t.Errorf("without the non-local source rules R heard %q, want %s (the test no longer shows the bypass)", got, want)
		}
	}
}

// testDAD adds an address the world already has, with DAD, and waits for
// the client's kernel to see the world's answer.
func testDAD(t *testing.T, tp *topology, p *Plan, scope Scope) {
	t.Helper()
	const dup = "2001:db8::5"
	kerneltest.Run(t, "ip", "-n", tp.server.Name, "addr", "add", dup+"/64", "dev", vethOf(t, tp.server), "nodad")
	before := countersT(t, tp, p)
	dev := vethOf(t, tp.client)
	kerneltest.Run(t, "ip", "-n", tp.client.Name, "addr", "add", dup+"/64", "dev", dev)
	deadline := time.Now().Add(6 * time.Second)
	for {
		out := kerneltest.Run(t, "ip", "-n", tp.client.Name, "-6", "addr", "show", "dev", dev, "to", dup+"/128")
		if strings.Contains(out, "dadfailed") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s never failed DAD (its neighbor solicitation from :: did not leave):\n%s", dup, out)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	after := countersT(t, tp, p)
	grew := after.Allowed.Packets > before.Allowed.Packets
	if scope == ScopeNetns {
		grew = after.AllowedOutside.Packets > before.AllowedOutside.Packets
	}
	if !grew {
		t.Errorf("DAD: counters %+v → %+v; want it accepted (allowed, or allowed_outside in netns scope)", before, after)
	}
}

// Attack (b): serve udp/8082 with loopback allowed. A socket bound to
// R:7777 sends to the container's own address on :8082 over lo (an inbound
// flow from R), then one on :8082 answers R: the reply direction of a
// served port. Without the non-local source drop R hears from :8082.
func TestRootSpoofServed(t *testing.T) {
	roottest.Require(t)
	spoofScopes(t, testSpoofServed)
}

func testSpoofServed(t *testing.T, scope Scope, kernelInCtr bool) {
	tp := newTopologyOpt(t, kernelInCtr)
	world := newWorldReceiver(t, tp)
	n := spec.Network{Mode: spec.NetworkDenyAll, Loopback: spec.LoopbackAllow, Serve: []spec.ServeRule{
		{Proto: "udp", Port: 8082}, {Proto: "udp", Port: 8080}, {Proto: "tcp", Port: 8080},
	}}
	p := scopedPlanT(t, tp, "op-spoofb-", n, scope)
	attack := "[" + spoofR6 + "]:7777>[2001:db8::1]:8082,[2001:db8::1]:8082>[" + spoofR6 + "]:7777," +
		spoofR4 + ":7777>192.0.2.1:8082,192.0.2.1:8082>" + spoofR4 + ":7777"

	c0 := countersT(t, tp, p)
	tp.spoof(t, tp.ctr, attack)
	if got := world.quiet(); len(got) != 0 {
		t.Errorf("R heard %v: the spoofed flow was served", got)
	}
	c1 := countersT(t, tp, p)
	// The first steps are spoofed; the answers, from the container's own
	// address, open a flow of their own and are denied.
	if c1.Spoofed.Packets-c0.Spoofed.Packets < 2 || c1.Denied.Packets-c0.Denied.Packets != 4 || c1.Served != c0.Served {
		t.Errorf("counters %+v → %+v; want 2 more spoofed, 4 more denied, nothing served", c0, c1)
	}
	for _, r := range []string{spoofR6, spoofR4} {
		if fs := flowsWith(t, tp, r); len(fs) != 0 {
			t.Errorf("conntrack entries with %s: %+v", r, fs)
		}
	}

	// Served replies over TCP and UDP, IPv4 and IPv6, and loopback.
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-http", ":8080")
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-udp", ":8080")
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-udp", "[::1]:9393")
	for _, addr := range []string{"192.0.2.1:8080", "[2001:db8::1]:8080"} {
		if _, reply, err := peerHTTP(tp.server, addr); err != nil || reply != httpReply {
			t.Errorf("GET %s = %q, %v; want %q", addr, reply, err, httpReply)
		}
		if err := peerUDP(tp.server, addr); err != nil {
			t.Errorf("udp %s: %v", addr, err)
		}
	}
	tp.expect(t,
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", true},
		probeCase{tp.ctr, "udp", "[::1]:9393", true},
	)
	c2 := countersT(t, tp, p)
	if c2.Served.Packets == 0 || c2.ServedConnections < 2 || c2.Denied != c1.Denied {
		t.Errorf("counters %+v → %+v; want served, 2 connections, nothing more denied", c1, c2)
	}

	spoofEpilogue(t, tp, p, world, scope, attack, 2, "[2001:db8::1]:8082", "192.0.2.1:8082")
}
