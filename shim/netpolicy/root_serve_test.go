package netpolicy

// Root tests of network.serve: a server in the bound cgroup answers a peer
// in the other namespace on a served port, nothing else changes.

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// peerHTTP connects from namespace n to addr, sends an HTTP-like request
// and reads the reply until the server closes. connected says whether the
// handshake completed.
func peerHTTP(n *kerneltest.Netns, addr string) (connected bool, reply string, err error) {
	err = n.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 1500*time.Millisecond)
		if err != nil {
			return err
		}
		connected = true
		defer c.Close()
		c.SetDeadline(time.Now().Add(1500 * time.Millisecond))
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: gensee\r\n\r\n"); err != nil {
			return err
		}
		b, err := io.ReadAll(c)
		reply = string(b)
		return err
	})
	return connected, reply, err
}

// peerUDP sends one datagram from namespace n to addr and waits for its
// echo.
func peerUDP(n *kerneltest.Netns, addr string) error {
	return n.Do(func() error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		return echo(c, []byte("gensee-served-udp"), time.Now().Add(1500*time.Millisecond))
	})
}

func TestRootServe(t *testing.T) {
	roottest.Require(t)
	for _, tc := range []struct {
		name        string
		scope       Scope
		kernelInCtr bool
	}{
		{"cgroup", ScopeCgroup, false},
		{"netns", ScopeNetns, false},
		// runc creates the namespace inside the container's cgroup: its
		// neighbor discovery is the cgroup's.
		{"netns-runc", ScopeNetns, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testServe(t, tc.scope, tc.kernelInCtr) })
	}
}

// testServe: deny_all serving tcp/8080 and udp/8080 in the client
// namespace (the container's), reached from the server namespace (the
// peer, 192.0.2.2 / 2001:db8::2).
func testServe(t *testing.T, scope Scope, kernelInCtr bool) {
	tp := newTopologyOpt(t, kernelInCtr)
	n := spec.Network{Mode: spec.NetworkDenyAll, Serve: []spec.ServeRule{{Proto: "udp", Port: 8080}, {Proto: "tcp", Port: 8080}}}
	p := scopedPlanT(t, tp, "op-serve-", n, scope)

	// Before any server binds them: a served local port opens nothing
	// outbound, the peer's echo servers get nothing.
	tp.expect(t,
		probeCase{tp.ctr, "tcp@:8080", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "udp@:8080", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "tcp@[::]:8080", "[2001:db8::2]:8080", false},
	)
	c0 := countersT(t, tp, p)
	if c0.Denied.Packets == 0 || c0.Served != (Count{}) || c0.ServedConnections != 0 {
		t.Errorf("after outbound attempts from the served port: %+v; want denied > 0, nothing served", c0)
	}

	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-http", ":8080")
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-http", ":8081")
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-udp", ":8080")
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-udp", ":8081")

	// Served: the exchange completes over IPv4 and IPv6, and UDP answers.
	for _, addr := range []string{"192.0.2.1:8080", "[2001:db8::1]:8080"} {
		if _, reply, err := peerHTTP(tp.server, addr); err != nil || reply != httpReply {
			t.Errorf("GET %s = %q, %v; want %q", addr, reply, err, httpReply)
		}
	}
	if err := peerUDP(tp.server, "192.0.2.1:8080"); err != nil {
		t.Errorf("udp 192.0.2.1:8080: %v", err)
	}
	c1 := countersT(t, tp, p)
	t.Logf("counters after serving: %+v", c1)
	if c1.Served.Packets == 0 || c1.ServedConnections < 2 || c1.Denied != c0.Denied {
		t.Errorf("counters after serving = %+v; want served > 0, >= 2 connections, denied unchanged", c1)
	}
	// Only neighbor discovery (the served ports' ND allowance) is ever
	// allowed, and in cgroup scope it is not the cgroup's here.
	if scope == ScopeCgroup && c1.Allowed != (Count{}) {
		t.Errorf("cgroup scope: allowed = %+v, want nothing", c1.Allowed)
	}
	var sum Count
	for _, sc := range c1.ServeCounts {
		sum.Packets += sc.Count.Packets
		sum.Bytes += sc.Count.Bytes
	}
	if len(c1.ServeCounts) != 2 || c1.ServeCounts[0].Port != (ServePort{ProtoTCP, 8080}) || c1.ServeCounts[1].Port != (ServePort{ProtoUDP, 8080}) ||
		c1.ServeCounts[0].Count.Packets == 0 || c1.ServeCounts[1].Count.Packets == 0 || sum != c1.Served {
		t.Errorf("serve counts = %+v; want tcp/8080 and udp/8080 > 0, summing to served %+v", c1.ServeCounts, c1.Served)
	}

	// Not served: no data reply. In cgroup scope the handshake may
	// complete: the SYN-ACK leaves from a request socket, which has no
	// cgroup, so policy accept passes it; the server's data comes from
	// the accepted (full) socket of the cgroup and is dropped. In netns
	// scope the SYN-ACK meets the outside rules and is dropped: nothing.
	connected, reply, err := peerHTTP(tp.server, "192.0.2.1:8081")
	switch {
	case err == nil || reply != "":
		t.Errorf("GET 192.0.2.1:8081 (not served) = %q, %v; want no reply", reply, err)
	case scope == ScopeNetns && connected:
		t.Errorf("GET 192.0.2.1:8081 (not served, netns scope): the handshake completed; want nothing at all")
	}
	t.Logf("not served: connected %v, %v", connected, err)
	if err := peerUDP(tp.server, "192.0.2.1:8081"); err == nil {
		t.Error("udp 192.0.2.1:8081 (not served) answered")
	}
	c2 := countersT(t, tp, p)
	if c2.ServedConnections != c1.ServedConnections || c2.Denied.Packets <= c1.Denied.Packets {
		t.Errorf("after unserved attempts: %+v → %+v; want served_conn unchanged, denied grown", c1, c2)
	}
	if scope == ScopeNetns && c2.DeniedOutside.Packets <= c1.DeniedOutside.Packets {
		t.Errorf("netns scope: the unserved SYN-ACK was not counted in denied_outside: %+v → %+v", c1, c2)
	}

	// Outbound authority is unchanged: the container cannot reach the
	// peer that it just served.
	tp.expect(t,
		probeCase{tp.ctr, "tcp", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "udp", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "tcp", "[2001:db8::2]:8080", false},
	)
	c3 := countersT(t, tp, p)
	t.Logf("counters: %+v", c3)
	if c3.Denied.Packets <= c2.Denied.Packets || c3.Served != c2.Served {
		t.Errorf("after outbound attempts: %+v → %+v; want denied grown, served unchanged", c2, c3)
	}
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}
}

// allow_exact keeps its tuples and serves too; a served port is no
// outbound tuple.
func TestRootServeAllowExact(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	n := spec.Network{Mode: spec.NetworkAllowExact,
		Allow: []spec.AllowRule{{IP: "192.0.2.2", Proto: "tcp", Port: 8081}},
		Serve: []spec.ServeRule{{Proto: "tcp", Port: 8080}}}
	p, err := NewPlan("op-servex-"+kerneltest.RandHex(4), n, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	startServerKind(t, tp.h, tp.ctr, tp.client, "serve-http", ":8080")
	if _, reply, err := peerHTTP(tp.server, "192.0.2.1:8080"); err != nil || reply != httpReply {
		t.Errorf("GET 192.0.2.1:8080 = %q, %v; want %q", reply, err, httpReply)
	}
	tp.expect(t,
		probeCase{tp.ctr, "tcp", "192.0.2.2:8081", true},
		probeCase{tp.ctr, "tcp", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "tcp@:8090", "192.0.2.2:8080", false},
	)
	c := countersT(t, tp, p)
	t.Logf("counters: %+v", c)
	if c.Served.Packets == 0 || c.ServedConnections == 0 || c.Allowed.Packets == 0 || c.Denied.Packets == 0 {
		t.Errorf("counters = %+v; want served, served_conn, allowed and denied > 0", c)
	}
	if len(c.Tuples) != 1 || c.Tuples[0].Packets == 0 || len(c.ServeCounts) != 1 || c.ServeCounts[0].Count != c.Served {
		t.Errorf("element counters: tuples %+v, serve %+v", c.Tuples, c.ServeCounts)
	}
}
