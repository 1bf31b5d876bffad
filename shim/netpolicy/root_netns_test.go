package netpolicy

// Root tests of the netns scope: the namespace is the container's own, so
// the table fails closed for every packet in it, whatever its cgroup.

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

func netnsPlanT(t *testing.T, tp *topology, prefix string, n spec.Network) *Plan {
	t.Helper()
	return scopedPlanT(t, tp, prefix, n, ScopeNetns)
}

// scopedPlanT plans n in scope for the topology's cgroup and applies it in
// the client namespace (the container's).
func scopedPlanT(t *testing.T, tp *topology, prefix string, n spec.Network, scope Scope) *Plan {
	t.Helper()
	p, err := NewPlanScoped(prefix+kerneltest.RandHex(4), n, tp.cgroupRef(t), scope)
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	t.Log(tp.client.Nft(t, "list", "table", "inet", p.Table))
	return p
}

func countersT(t *testing.T, tp *topology, p *Plan) Counters {
	t.Helper()
	c, err := ReadCounters(ctxT(t), tp.client.FD, p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// deny_all: the bound cgroup is denied and counted as before; another
// cgroup of the namespace is denied too, counted in denied_outside and
// logged with the outside prefix.
func TestRootNetnsDenyAll(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	logs := listenNflog(t, tp.client, DefaultLogGroup)
	p := netnsPlanT(t, tp, "op-nsdeny-", spec.Network{Mode: spec.NetworkDenyAll})

	c0 := countersT(t, tp, p)
	tp.expect(t,
		probeCase{tp.other, "tcp", "192.0.2.2:8080", false},
		probeCase{tp.other, "udp", "192.0.2.2:8080", false},
		probeCase{tp.other, "icmp", "192.0.2.2", false},
		probeCase{tp.other, "pingsock", "192.0.2.2", false},
		probeCase{tp.other, "tcp", "[2001:db8::2]:8080", false},
		probeCase{tp.other, "tcp", "127.0.0.1:9090", false}, // the container's own lo too
	)
	c1 := countersT(t, tp, p)
	if c1.Denied != c0.Denied || c1.DeniedOutside.Packets <= c0.DeniedOutside.Packets {
		t.Errorf("after another cgroup's attempts: %+v → %+v; want denied unchanged, denied_outside grown", c0, c1)
	}
	tp.expect(t,
		probeCase{tp.ctr, "tcp", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "udp", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", false},
		probeCase{tp.ctrChild, "tcp", "192.0.2.2:8080", false},
	)
	c2 := countersT(t, tp, p)
	t.Logf("counters: %+v", c2)
	if c2.Denied.Packets <= c1.Denied.Packets || c2.Allowed.Packets != 0 || c2.AllowedOutside.Packets != 0 {
		t.Errorf("after the cgroup's attempts: %+v → %+v; want denied grown, nothing allowed", c1, c2)
	}
	logs.wait(t, p.LogPrefixOutside, p.LogPrefix)
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}
}

// allow_exact: an allowed tuple is reachable from any cgroup of the
// namespace (the contract allows it), nothing else is; the tuple's element
// counter sees both.
func TestRootNetnsAllowExact(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	p := netnsPlanT(t, tp, "op-nsexact-", spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{{IP: "192.0.2.2", Proto: "tcp", Port: 8080}}})
	tp.expect(t,
		probeCase{tp.ctr, "tcp", "192.0.2.2:8080", true},
		probeCase{tp.other, "tcp", "192.0.2.2:8080", true},
		probeCase{tp.ctr, "tcp", "192.0.2.2:8081", false},
		probeCase{tp.other, "tcp", "192.0.2.2:8081", false},
		probeCase{tp.other, "tcp", "192.0.2.3:8080", false},
		probeCase{tp.other, "udp", "192.0.2.2:8080", false},
		probeCase{tp.other, "icmp", "192.0.2.2", false},
		probeCase{tp.other, "tcp", "[2001:db8::2]:8080", false},
		probeCase{tp.other, "tcp", "127.0.0.1:9090", false},
	)
	// Only the tuple rules accept here: the element counter is their sum,
	// once the probes' last segments (a FIN's retransmit, a late ACK) are
	// through: the rule and element counters are read one after the other.
	var c Counters
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c = countersT(t, tp, p)
		if len(c.Tuples) == 1 && c.Tuples[0].Packets == c.Allowed.Packets+c.AllowedOutside.Packets || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("counters: %+v", c)
	if c.Allowed.Packets == 0 || c.AllowedOutside.Packets == 0 || c.Denied.Packets == 0 || c.DeniedOutside.Packets == 0 {
		t.Errorf("counters = %+v, want allowed, allowed_outside, denied and denied_outside > 0", c)
	}
	if len(c.Tuples) != 1 || c.Tuples[0].Packets != c.Allowed.Packets+c.AllowedOutside.Packets {
		t.Errorf("tuple counters = %+v, want one counting allowed + allowed_outside", c.Tuples)
	}
}

// Every kind of tuple, with a namespace created outside the container's
// cgroup: its neighbor discovery leaves through a kernel socket no cgroup
// rule attributes, so IPv6 works only through the outside ND rule. Loopback
// allowed: the container's own lo is open to every cgroup.
func TestRootNetnsAllowEveryKind(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	p := netnsPlanT(t, tp, "op-nskinds-", spec.Network{Mode: spec.NetworkAllowExact, Loopback: spec.LoopbackAllow, Allow: []spec.AllowRule{
		{IP: "192.0.2.2", Proto: "udp", Port: 8080},
		{IP: "192.0.2.3", Proto: "icmp"},
		{IP: "2001:db8::2", Proto: "tcp", Port: 8081},
	}})
	tp.expect(t,
		probeCase{tp.ctr, "udp", "192.0.2.2:8080", true},
		probeCase{tp.ctr, "pingsock", "192.0.2.3", true},
		probeCase{tp.ctr, "tcp", "[2001:db8::2]:8081", true},
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", true},
		probeCase{tp.other, "udp", "192.0.2.2:8080", true},
		probeCase{tp.other, "pingsock", "192.0.2.3", true},
		probeCase{tp.other, "tcp", "[2001:db8::2]:8081", true},
		probeCase{tp.other, "tcp", "127.0.0.1:9090", true},
		probeCase{tp.ctr, "tcp", "[2001:db8::2]:8080", false},
		probeCase{tp.other, "tcp", "[2001:db8::2]:8080", false},
		probeCase{tp.other, "pingsock", "192.0.2.2", false},
		probeCase{tp.other, "udp", "192.0.2.3:8080", false},
	)
	t.Logf("counters: %+v", countersT(t, tp, p))
}

// A server on an allowed loopback tuple, in another cgroup than the
// client: its SYN-ACK (a request socket, not a full one) and its replies
// leave through the outside reply rule; loopback stays denied otherwise.
func TestRootNetnsLoopbackTupleReplies(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	netnsPlanT(t, tp, "op-nsreply-", spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{{IP: "127.0.0.1", Proto: "tcp", Port: 9191}}})
	startServer(t, tp.h, tp.other, tp.client, "127.0.0.1:9191")
	tp.expect(t,
		probeCase{tp.ctr, "tcp", "127.0.0.1:9191", true},
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", false},
	)
}

// Policy drop is part of the plan: read-back sees it changed, and a chain
// whose rules were flushed still drops everything.
func TestRootNetnsPolicy(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	p := netnsPlanT(t, tp, "op-nspol-", spec.Network{Mode: spec.NetworkDenyAll, Loopback: spec.LoopbackAllow})
	tp.expect(t, probeCase{tp.other, "tcp", "127.0.0.1:9090", true})

	tp.client.Nft(t, "flush", "chain", "inet", p.Table, "output")
	tp.expect(t,
		probeCase{tp.other, "tcp", "127.0.0.1:9090", false},
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", false},
	)
	var de *DriftError
	if err := ReadBack(ctxT(t), tp.client.FD, p); !errors.As(err, &de) || !strings.Contains(err.Error(), "is missing") {
		t.Errorf("ReadBack after flush = %v, want missing rules", err)
	}

	tp.client.Nft(t, "delete", "table", "inet", p.Table)
	if err := Apply(ctxT(t), tp.client.FD, p); err != nil {
		t.Fatal(err)
	}
	tp.client.Nft(t, "add", "chain", "inet", p.Table, "output", "{ type filter hook output priority filter; policy accept; }")
	if err := ReadBack(ctxT(t), tp.client.FD, p); !errors.As(err, &de) || !strings.Contains(err.Error(), "policy 1}, want {type filter hook 3 priority 0 policy 0}") {
		t.Errorf("ReadBack after policy accept = %v, want the policy named", err)
	}
}

// nflogListener collects the prefixes of NFLOG records of one group in a
// namespace. Only what this test needs: bind, copy packets, read prefixes.
type nflogListener struct {
	mu   sync.Mutex
	seen map[string]int
}

func listenNflog(t *testing.T, n *kerneltest.Netns, group uint16) *nflogListener {
	t.Helper()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: n.FD})
	if err != nil {
		t.Fatal(err)
	}
	hdr := []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}
	binary.BigEndian.PutUint16(hdr[2:], group)
	config := func(a ...netlink.Attribute) {
		b, err := netlink.MarshalAttributes(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8 | 1), Flags: netlink.Request | netlink.Acknowledge},
			Data:   append(append([]byte{}, hdr...), b...),
		}); err != nil {
			t.Fatalf("configure nflog group %d: %v", group, err)
		}
	}
	config(netlink.Attribute{Type: 1, Data: []byte{1}})                  // NFULA_CFG_CMD: bind
	config(netlink.Attribute{Type: 2, Data: []byte{0, 0, 0, 128, 2, 0}}, // NFULA_CFG_MODE: copy 128 bytes of packet
		netlink.Attribute{Type: 5, Data: binary.BigEndian.AppendUint32(nil, 1)}) // NFULA_CFG_QTHRESH 1
	l := &nflogListener{seen: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msgs, err := c.Receive()
			if err != nil {
				if errors.Is(err, unix.ENOBUFS) {
					continue
				}
				return
			}
			for _, m := range msgs {
				if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8) || len(m.Data) < 4 {
					continue
				}
				ad, err := netlink.NewAttributeDecoder(m.Data[4:])
				if err != nil {
					continue
				}
				for ad.Next() {
					if ad.Type() == 10 { // NFULA_PREFIX
						l.mu.Lock()
						l.seen[strings.TrimRight(ad.String(), "\x00")]++
						l.mu.Unlock()
					}
				}
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return l
}

// wait fails the test unless every prefix was seen within a few seconds.
func (l *nflogListener) wait(t *testing.T, prefixes ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		l.mu.Lock()
		missing := ""
		for _, p := range prefixes {
			if l.seen[p] == 0 {
				missing = p
			}
		}
		seen := make(map[string]int, len(l.seen))
		for k, v := range l.seen {
			seen[k] = v
		}
		l.mu.Unlock()
		if missing == "" {
			t.Logf("nflog prefixes: %v", seen)
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("no nflog record with prefix %q (seen %v)", missing, seen)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
