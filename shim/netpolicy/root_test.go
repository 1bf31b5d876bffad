package netpolicy

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// applyT applies p and removes its table at cleanup, checking no gensee
// table is left in the namespace.
func applyT(t *testing.T, n *kerneltest.Netns, p *Plan) {
	t.Helper()
	ctx := ctxT(t)
	if err := Apply(ctx, n.FD, p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Cleanup(func() {
		if err := Remove(context.Background(), n.FD, p.Table); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if left, err := List(context.Background(), n.FD); err != nil || slices.Contains(left, p.Table) {
			t.Errorf("cleanup: %s left behind (tables %v, %v)", p.Table, left, err)
		}
	})
}

func TestRootDenyAll(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	p, err := NewPlan("op-denyall-"+kerneltest.RandHex(4), spec.Network{Mode: spec.NetworkDenyAll}, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	t.Log(tp.client.Nft(t, "list", "table", "inet", p.Table))

	tp.expect(t,
		probeCase{tp.ctr, "tcp", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "udp", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "icmp", "192.0.2.2", false},
		probeCase{tp.ctr, "pingsock", "192.0.2.2", false},
		probeCase{tp.ctr, "tcp", "[2001:db8::2]:8080", false},
		probeCase{tp.ctr, "icmp", "2001:db8::2", false},
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", false},
		probeCase{tp.ctrChild, "tcp", "192.0.2.2:8080", false}, // descendants are bound too
		// Another cgroup in the same namespace is untouched.
		probeCase{tp.other, "tcp", "192.0.2.2:8080", true},
		probeCase{tp.other, "udp", "192.0.2.2:8080", true},
		probeCase{tp.other, "icmp", "192.0.2.2", true},
		probeCase{tp.other, "pingsock", "192.0.2.2", true},
		probeCase{tp.other, "tcp", "[2001:db8::2]:8080", true},
		probeCase{tp.other, "tcp", "127.0.0.1:9090", true},
	)

	c, err := ReadCounters(ctxT(t), tp.client.FD, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counters: %+v", c)
	if c.Denied.Packets == 0 || c.Allowed.Packets != 0 || len(c.Tuples) != 0 || c.AllowedOutside != (Count{}) || c.DeniedOutside != (Count{}) {
		t.Errorf("counters = %+v, want denied > 0, allowed 0, no tuples, no outside counts (cgroup scope)", c)
	}
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}
}

func TestRootAllowExact(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	n := spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{{IP: "192.0.2.2", Proto: "tcp", Port: 8080}}}
	p, err := NewPlan("op-exact-"+kerneltest.RandHex(4), n, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	t.Log(tp.client.Nft(t, "list", "table", "inet", p.Table))

	tp.expect(t,
		probeCase{tp.ctr, "tcp", "192.0.2.2:8080", true},
		probeCase{tp.ctrChild, "tcp", "192.0.2.2:8080", true},
		probeCase{tp.ctr, "tcp", "192.0.2.2:8081", false}, // same IP, other port
		probeCase{tp.ctr, "tcp", "192.0.2.3:8080", false}, // other IP
		probeCase{tp.ctr, "tcp", "[2001:db8::2]:8080", false},
		probeCase{tp.ctr, "udp", "192.0.2.2:8080", false},
		probeCase{tp.ctr, "icmp", "192.0.2.2", false},
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", false}, // loopback denied by default
		probeCase{tp.other, "tcp", "192.0.2.2:8081", true},
		probeCase{tp.other, "tcp", "192.0.2.3:8080", true},
		probeCase{tp.other, "tcp", "[2001:db8::2]:8080", true},
		probeCase{tp.other, "udp", "192.0.2.2:8080", true},
		probeCase{tp.other, "icmp", "192.0.2.2", true},
	)

	c, err := ReadCounters(ctxT(t), tp.client.FD, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counters: %+v", c)
	if c.Allowed.Packets == 0 || c.Denied.Packets == 0 {
		t.Errorf("counters = %+v, want allowed > 0 and denied > 0", c)
	}
	if len(c.Tuples) != 1 || c.Tuples[0].Tuple != p.Allow[0] || c.Tuples[0].Packets == 0 || c.Tuples[0].Packets > c.Allowed.Packets || c.ElementsWithheld != "" {
		t.Errorf("tuple counters = %+v (%s), want one for %v with 0 < packets <= allowed", c.Tuples, c.ElementsWithheld, p.Allow[0])
	}
	// Someone resets the named counters: they are still read, the
	// per-tuple counts (now above them) are withheld, and it says why.
	tp.client.Nft(t, "reset", "counters", "table", "inet", p.Table)
	c, err = ReadCounters(ctxT(t), tp.client.FD, p)
	if err != nil || c.Tuples != nil || !strings.Contains(c.ElementsWithheld, "reset") {
		t.Errorf("after nft reset counters: %+v, %v; want the named counters, no tuple counts and why", c, err)
	}
}

// Every kind of tuple lets exactly itself through. The client namespace is
// created inside the container cgroup, as runc does, so IPv6 works only
// through the neighbor-discovery allowance.
func TestRootAllowEveryKind(t *testing.T) {
	roottest.Require(t)
	tp := newTopologyOpt(t, true)
	n := spec.Network{Mode: spec.NetworkAllowExact, Loopback: spec.LoopbackAllow, Allow: []spec.AllowRule{
		{IP: "192.0.2.2", Proto: "udp", Port: 8080},
		{IP: "192.0.2.3", Proto: "icmp"},
		{IP: "2001:db8::2", Proto: "tcp", Port: 8081},
		{IP: "2001:db8::2", Proto: "icmpv6"},
	}}
	p, err := NewPlan("op-kinds-"+kerneltest.RandHex(4), n, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	t.Log(tp.client.Nft(t, "list", "table", "inet", p.Table))
	tp.expect(t,
		probeCase{tp.ctr, "udp", "192.0.2.2:8080", true},
		probeCase{tp.ctr, "icmp", "192.0.2.3", true},
		probeCase{tp.ctr, "pingsock", "192.0.2.3", true},
		probeCase{tp.ctr, "pingsock", "192.0.2.2", false},
		probeCase{tp.ctr, "tcp", "[2001:db8::2]:8081", true},
		probeCase{tp.ctr, "icmp", "2001:db8::2", true},
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", true},
		probeCase{tp.ctr, "udp", "192.0.2.3:8080", false},
		probeCase{tp.ctr, "icmp", "192.0.2.2", false},
		probeCase{tp.ctr, "tcp", "[2001:db8::2]:8080", false},
		probeCase{tp.ctr, "tcp", "192.0.2.2:8081", false},
	)
	c, err := ReadCounters(ctxT(t), tp.client.FD, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counters: %+v", c)
	if len(c.Tuples) != 4 {
		t.Fatalf("tuples = %+v, want 4", c.Tuples)
	}
	for _, tc := range c.Tuples {
		if tc.Packets == 0 {
			t.Errorf("tuple %v counted nothing", tc.Tuple)
		}
	}
}

// A server in the container's cgroup answering on an allowed loopback tuple
// gets its replies out (the reply rule) while loopback stays denied.
func TestRootLoopbackTupleReplies(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	n := spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{{IP: "127.0.0.1", Proto: "tcp", Port: 9191}}}
	p, err := NewPlan("op-reply-"+kerneltest.RandHex(4), n, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	startServer(t, tp.h, tp.ctr, tp.client, "127.0.0.1:9191")
	tp.expect(t,
		probeCase{tp.ctr, "tcp", "127.0.0.1:9191", true},
		probeCase{tp.ctr, "tcp", "127.0.0.1:9090", false},
	)
}

func TestRootReadBackDetectsTamper(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	n := spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{
		{IP: "192.0.2.2", Proto: "tcp", Port: 8080}, {IP: "192.0.2.2", Proto: "udp", Port: 8080},
	}}
	p, err := NewPlan("op-tamper-"+kerneltest.RandHex(4), n, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	ctx := ctxT(t)
	nft := func(args ...string) string { return tp.client.Nft(t, args...) }
	handle := func(re string) string {
		t.Helper()
		out := nft("-a", "list", "chain", "inet", p.Table, "output")
		h := regexp.MustCompile(re + ` # handle (\d+)`).FindStringSubmatch(out)
		if h == nil {
			t.Fatalf("no rule matching %q in\n%s", re, out)
		}
		return h[1]
	}
	const twin4 = `add @allow4_used \{ ip daddr \. meta l4proto \. th dport counter \} comment "gensee: count per element, allowed ipv4 tuples"`
	for _, tc := range []struct {
		name   string
		tamper func()
		want   string
	}{
		{"inserted accept", func() { nft("insert", "rule", "inet", p.Table, "output", "meta", "l4proto", "tcp", "accept") }, "extra rule at position 0"},
		{"deleted drop", func() {
			nft("delete", "rule", "inet", p.Table, "output", "handle", handle(`drop comment "gensee: deny"`))
		}, "rule 15 (gensee: deny) is missing"},
		{"deleted non-local source drop", func() {
			nft("delete", "rule", "inet", p.Table, "output", "handle", handle(`drop comment "gensee: deny non-local source"`))
		}, "rule 2 (gensee: deny non-local source) is missing"},
		{"deleted own label", func() {
			nft("delete", "rule", "inet", p.Table, "output", "handle", handle(`ct label set 27 comment "gensee: label the flows the container opens"`))
		}, "rule 0 (gensee: label the flows the container opens) is missing"},
		{"own label on every socket", func() {
			nft("replace", "rule", "inet", p.Table, "output", "handle", handle(`ct label set 27 comment "gensee: label the flows the container opens"`),
				"ct", "direction", "original", "ct", "label", "set", "27", "comment", `"gensee: label the flows the container opens"`)
		}, "rule 0 (gensee: label the flows the container opens) changed"},
		{"deeper cgroup level", func() {
			// google/nftables v0.3.0 cannot decode `socket`: only the raw
			// dump sees this change.
			nft("replace", "rule", "inet", p.Table, "output", "handle", handle(`drop comment "gensee: deny"`),
				"socket", "cgroupv2", "level", "2", "@cg", "meta", "skuid", ">=", "0", "counter", "name", "denied", "drop", "comment", `"gensee: deny"`)
		}, "rule 15 (gensee: deny) changed"},
		{"swapped element", func() {
			// The set is sized to the plan: a plain add is refused...
			if out, err := exec.Command("nsenter", "--net="+tp.client.Path, "nft", "add", "element", "inet", p.Table, "allow4", "{ 192.0.2.3 . tcp . 22 }").CombinedOutput(); err == nil {
				t.Errorf("adding to a full set succeeded: %s", out)
			}
			// ...so swap one, in one transaction.
			nft("delete element inet " + p.Table + " allow4 { 192.0.2.2 . tcp . 8080 }; add element inet " + p.Table + " allow4 { 192.0.2.3 . tcp . 22 }")
		}, "set allow4 lacks 1 elements: 192.0.2.2:8080/tcp; set allow4 has 1 extra elements: 192.0.2.3:22/tcp"},
		{"deleted element", func() { nft("delete", "element", "inet", p.Table, "allow4", "{ 192.0.2.2 . udp . 8080 }") }, "set allow4 lacks 1 elements: 192.0.2.2:8080/udp"},
		{"element with a quota", func() {
			// A spent quota ends every rule that matches the element:
			// the allowed tuple would be denied. nft(8) writes no
			// per-element quota; netlink does.
			nft("delete", "element", "inet", p.Table, "allow4", "{ 192.0.2.2 . udp . 8080 }")
			addElemQuota(t, tp.client.FD, p.Table, "allow4", []byte{192, 0, 2, 2, unix.IPPROTO_UDP, 0, 0, 0, 0x1f, 0x90, 0, 0})
		}, "element 192.0.2.2:8080/udp carries expressions [quota]"},
		{"cgroup with a quota", func() {
			// Spent, it would end every cgroup rule: policy accept.
			nft("flush", "set", "inet", p.Table, "cg")
			key := make([]byte, 8)
			binary.NativeEndian.PutUint64(key, p.Cgroup.ID)
			addElemQuota(t, tp.client.FD, p.Table, "cg", key)
		}, "carries expressions [quota]"},
		{"used element outside the set", func() {
			nft("add", "element", "inet", p.Table, "allow4_used", "{ 192.0.2.3 . tcp . 22 }")
		}, "set allow4_used has 1 elements not in allow4: 192.0.2.3:22/tcp"},
		{"counting rule deleted", func() {
			nft("delete", "rule", "inet", p.Table, "output", "handle", handle(twin4))
		}, "(gensee: count per element, allowed ipv4 tuples) is missing"},
		{"counting rule with a preset counter", func() {
			// The kernel does not dump an add's counter when the set
			// has one of its own: only because it has none is this
			// seen.
			nft("replace", "rule", "inet", p.Table, "output", "handle", handle(twin4),
				"socket", "cgroupv2", "level", "1", "@cg", "ip", "daddr", ".", "meta", "l4proto", ".", "th", "dport", "@allow4",
				"add", "@allow4_used", "{", "ip", "daddr", ".", "meta", "l4proto", ".", "th", "dport", "counter", "packets", "7000", "bytes", "700000", "}",
				"comment", `"gensee: count per element, allowed ipv4 tuples"`)
		}, "counter preset to 7000 packets, 700000 bytes"},
		{"counting rule after its rule", func() {
			h := handle(`counter name "allowed" accept comment "gensee: allowed ipv4 tuples"`)
			nft("delete", "rule", "inet", p.Table, "output", "handle", handle(twin4))
			nft("add", "rule", "inet", p.Table, "output", "position", h,
				"socket", "cgroupv2", "level", "1", "@cg", "ip", "daddr", ".", "meta", "l4proto", ".", "th", "dport", "@allow4",
				"add", "@allow4_used", "{", "ip", "daddr", ".", "meta", "l4proto", ".", "th", "dport", "counter", "}",
				"comment", `"gensee: count per element, allowed ipv4 tuples"`)
		}, "extra rule"},
		{"swapped cgroup", func() {
			nft("flush", "set", "inet", p.Table, "cg")
			nft("add", "element", "inet", p.Table, "cg", `{ "unified`+tp.other+`" }`)
		}, "set cg lacks 1 elements"},
		{"dormant table", func() { nft("add", "table", "inet", p.Table, "{ flags dormant; }") }, "dormant"},
		{"extra chain", func() {
			nft("add", "chain", "inet", p.Table, "early", "{ type filter hook output priority -10; policy accept; }")
		}, "extra chain early"},
		{"removed table", func() { nft("delete", "table", "inet", p.Table) }, "is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ReadBack(ctx, tp.client.FD, p); err != nil {
				t.Fatalf("ReadBack before tampering: %v", err)
			}
			// Start the next case from a fresh, verified table.
			defer func() {
				if err := Remove(ctx, tp.client.FD, p.Table); err != nil {
					t.Fatal(err)
				}
				if err := Apply(ctx, tp.client.FD, p); err != nil {
					t.Fatal(err)
				}
			}()
			tc.tamper()
			err := ReadBack(ctx, tp.client.FD, p)
			var de *DriftError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadBack = %v, want a *DriftError mentioning %q", err, tc.want)
			}
			t.Logf("detected: %v", err)
		})
	}

	// A count written into a used set from outside reads back as a key
	// of its set, but exceeds what the named counters saw: ReadCounters
	// refuses it rather than report it.
	nft("add", "element", "inet", p.Table, "allow4_used", "{ 192.0.2.2 . udp . 8080 counter packets 1000000 bytes 1000000 }")
	if err := ReadBack(ctx, tp.client.FD, p); err != nil {
		t.Fatalf("ReadBack of a used set holding a key of its set: %v", err)
	}
	if c, err := ReadCounters(ctx, tp.client.FD, p); err != nil || c.Tuples != nil || !strings.Contains(c.ElementsWithheld, "per-tuple counts (1000000 packets") {
		t.Errorf("ReadCounters of a forged count = %+v, %v; want the tuple counts withheld and the excess named", c, err)
	}

	// Remove, twice: the second is a no-op.
	for i := 0; i < 2; i++ {
		if err := Remove(ctx, tp.client.FD, p.Table); err != nil {
			t.Fatalf("Remove #%d: %v", i+1, err)
		}
	}
	if left, err := List(ctx, tp.client.FD); err != nil || len(left) != 0 {
		t.Fatalf("List after Remove = %v, %v", left, err)
	}
	if out := nft("list", "tables"); strings.Contains(out, p.Table) {
		t.Fatalf("nft still lists the table:\n%s", out)
	}
}

// A second install of the same table fails and leaves the first intact; a
// foreign table is never removed.
func TestRootInstallRefusesExisting(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	p, err := NewPlan("op-twice-"+kerneltest.RandHex(4), spec.Network{Mode: spec.NetworkDenyAll}, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	ctx := ctxT(t)
	if err := Apply(ctx, tp.client.FD, p); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second Apply = %v, want 'already exists'", err)
	}
	if err := ReadBack(ctx, tp.client.FD, p); err != nil {
		t.Fatalf("first table damaged by the refused install: %v", err)
	}
	if names, err := List(ctx, tp.client.FD); err != nil || !slices.Equal(names, []string{p.Table}) {
		t.Fatalf("List = %v, %v", names, err)
	}
	if err := Remove(ctx, tp.client.FD, "filter"); err == nil {
		t.Fatal("Remove of a non-gensee table: want refusal")
	}
	if err := Install(ctx, 0, p); err == nil {
		t.Fatal("Install with netns fd 0: want refusal")
	}
}

// Install flushes conntrack in the target namespace, so flows from before
// the policy cannot pass as replies.
func TestRootInstallFlushesConntrack(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	n := spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{{IP: "192.0.2.2", Proto: "tcp", Port: 8080}}}
	a, err := NewPlan("op-ct-a-"+kerneltest.RandHex(2), n, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, a) // its ct expression turns conntrack on in the namespace
	tp.expect(t, probeCase{tp.other, "udp", "192.0.2.2:8080", true})
	flows := func() int {
		t.Helper()
		c, err := conntrack.Dial(&netlink.Config{NetNS: tp.client.FD})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		f, err := c.Dump(nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(f)
	}
	if flows() == 0 {
		t.Fatal("no conntrack entry after a UDP exchange: conntrack is not tracking this namespace")
	}
	b, err := NewPlan("op-ct-b-"+kerneltest.RandHex(2), n, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, b)
	if n := flows(); n != 0 {
		t.Fatalf("%d conntrack entries survived Install", n)
	}
}

// When the namespace was created inside the container's cgroup (runc does
// so), its per-namespace kernel sockets — IPv6 neighbor discovery — belong
// to that cgroup. Their packets are dropped too, but counted as
// denied_kernel: "denied" and the log stay what the workload attempted.
// (TCP resets and ICMP errors leave through per-CPU kernel sockets of the
// root cgroup on current kernels: never attributed to a container.)
func TestRootKernelRepliesCountedApart(t *testing.T) {
	roottest.Require(t)
	tp := newTopologyOpt(t, true)
	p, err := NewPlan("op-kernel-"+kerneltest.RandHex(2), spec.Network{Mode: spec.NetworkDenyAll}, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, tp.client, p)
	// From the server side: a SYN to a closed port of the client over
	// IPv6. The client's neighbor advertisement is dropped, so the server
	// never gets as far as a reset.
	var dialErr error
	if err := tp.server.Do(func() error {
		c, err := net.DialTimeout("tcp", "[2001:db8::1]:7", 1500*time.Millisecond)
		if err == nil {
			c.Close()
		}
		dialErr = err
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if dialErr == nil || strings.Contains(dialErr.Error(), "refused") {
		t.Errorf("dial to the client over IPv6 = %v, want no answer (neighbor advertisement dropped)", dialErr)
	}
	c, err := ReadCounters(ctxT(t), tp.client.FD, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counters: %+v", c)
	if c.DeniedKernel.Packets == 0 || c.Denied.Packets != 0 {
		t.Errorf("counters = %+v, want denied_kernel > 0 and denied 0", c)
	}
	// The workload's own attempt still counts as denied.
	tp.expect(t, probeCase{tp.ctr, "udp", "192.0.2.2:8080", false})
	if c, err = ReadCounters(ctxT(t), tp.client.FD, p); err != nil || c.Denied.Packets == 0 {
		t.Errorf("after a workload attempt: %+v, %v; want denied > 0", c, err)
	}
}

// RuleExprs reads the `socket` match google/nftables drops on read-back:
// every rule of the table begins with it.
func TestRootRuleExprs(t *testing.T) {
	roottest.Require(t)
	ns := kerneltest.NewNetns(t)
	p, err := NewPlan("op-exprs-"+kerneltest.RandHex(2), spec.Network{Mode: spec.NetworkDenyAll}, CgroupRef{Path: "/gensee-exprs", ID: 1, Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	applyT(t, ns, p)
	rules, err := RuleExprs(ctxT(t), ns.FD, p.Table)
	if err != nil || len(rules) == 0 {
		t.Fatalf("RuleExprs = %q, %v", rules, err)
	}
	want := CanonExpr(&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 1, Register: reg1})
	for i, r := range rules {
		if len(r) == 0 || r[0] != want {
			t.Errorf("rule %d = %q, want it to begin with %s", i, r, want)
		}
	}
	if _, err := RuleExprs(ctxT(t), ns.FD, "filter"); err == nil {
		t.Error("RuleExprs of a non-gensee table: want refusal")
	}
}

// addElemQuota adds key to set with a one-byte quota on the element, over
// netlink: one batch of one NEWSETELEM.
func addElemQuota(t *testing.T, netnsFD int, table, set string, key []byte) {
	t.Helper()
	quota := exprAttr(t, "quota",
		netlink.Attribute{Type: unix.NFTA_QUOTA_BYTES, Data: binary.BigEndian.AppendUint64(nil, 1)},
		netlink.Attribute{Type: unix.NFTA_QUOTA_FLAGS, Data: make([]byte, 4)})
	elem := attrBytes(t,
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_KEY, Data: attrBytes(t, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: key})},
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_EXPR, Data: quota})
	msg := attrBytes(t,
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(table + "\x00")},
		netlink.Attribute{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(set + "\x00")},
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_LIST_ELEMENTS, Data: attrBytes(t, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: elem})})
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: netnsFD})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	batch := []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES}
	if _, err := c.SendMessages([]netlink.Message{
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN), Flags: netlink.Request}, Data: batch},
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWSETELEM), Flags: netlink.Request | netlink.Acknowledge | netlink.Create}, Data: append([]byte{unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0}, msg...)},
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_MSG_BATCH_END), Flags: netlink.Request}, Data: batch},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Receive(); err != nil {
		t.Fatalf("add %s element with a quota: %v", set, err)
	}
}

// TestRootGeneration: a read-back says the generation it matched at; a
// commit of any table in the namespace moves it, and the dataplane's own
// updates (counters, the twin rule's add to a used set) do not.
func TestRootGeneration(t *testing.T) {
	roottest.Require(t)
	tp := newTopology(t)
	n := spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{{IP: "192.0.2.2", Proto: "tcp", Port: 8080}}}
	p, err := NewPlan("op-gen-"+kerneltest.RandHex(4), n, tp.cgroupRef(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	applyT(t, tp.client, p)
	m, err := ReadBackAt(ctx, tp.client.FD, p)
	if err != nil || !m.OK {
		t.Fatalf("ReadBackAt = %+v, %v; want a match at a known generation", m, err)
	}
	g, err := OpenGen(tp.client.FD)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gen := func() uint32 {
		t.Helper()
		v, err := g.Read()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if now := gen(); now != m.Gen {
		t.Fatalf("generation %d right after a read-back at %d", now, m.Gen)
	}
	tp.expect(t, probeCase{tp.ctr, "tcp", "192.0.2.2:8080", true})
	if again, err := ReadBackAt(ctx, tp.client.FD, p); err != nil || again != m {
		t.Fatalf("after allowed traffic: ReadBackAt = %+v, %v; want %+v (the dataplane's updates are no commit)", again, err, m)
	}
	tp.client.Nft(t, "add", "table", "inet", "zz_other")
	t.Cleanup(func() { tp.client.Nft(t, "delete", "table", "inet", "zz_other") })
	if now := gen(); now == m.Gen {
		t.Fatalf("a commit of another table left the generation at %d", now)
	}
}
