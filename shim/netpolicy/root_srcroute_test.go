package netpolicy

// Root tests of the source-route drop: a workload that names its own path
// (IPv4 LSRR/SSRR option, IPv6 routing header) through an allowed first
// hop cannot send, in either scope, and is counted; the test then deletes
// the rules and shows the table alone would have matched the first hop.

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// srcRouteProbes go through an allowed first hop (udp 192.0.2.2:8080,
// [2001:db8::2]:8080) to destinations the contract does not allow.
var srcRouteProbes = []string{
	"lsrr,192.0.2.2,203.0.113.9:8080",
	"ssrr,192.0.2.2,203.0.113.9:8080",
	"rt6,2001:db8::2,[2001:db8:99::9]:8080",
}

func TestRootSourceRouted(t *testing.T) {
	roottest.Require(t)
	for _, scope := range []Scope{ScopeCgroup, ScopeNetns} {
		t.Run(string(scope), func(t *testing.T) { testSourceRouted(t, scope) })
	}
}

func testSourceRouted(t *testing.T, scope Scope) {
	tp := newTopology(t)
	n := spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{
		{IP: "192.0.2.2", Proto: "udp", Port: 8080}, {IP: "2001:db8::2", Proto: "udp", Port: 8080},
	}}
	p := scopedPlanT(t, tp, "op-srr-", n, scope)
	tp.expect(t, probeCase{tp.ctr, "udp", "192.0.2.2:8080", true}, probeCase{tp.ctr, "udp", "[2001:db8::2]:8080", true})
	c0 := countersT(t, tp, p)

	send := func(cg string) []error {
		var errs []error
		for _, target := range srcRouteProbes {
			errs = append(errs, probe(t, tp.h, cg, tp.client, "srcroute", target))
		}
		return errs
	}
	for i, err := range send(tp.ctr) {
		if err == nil || !strings.Contains(err.Error(), "operation not permitted") {
			t.Errorf("%s from the cgroup: %v, want EPERM (dropped)", srcRouteProbes[i], err)
		}
	}
	c1 := countersT(t, tp, p)
	t.Logf("counters: %+v", c1)
	if c1.SourceRouted.Packets != 3 || c1.Denied.Packets != c0.Denied.Packets+3 || c1.Allowed != c0.Allowed {
		t.Errorf("after the source-routed sends: %+v → %+v; want source_routed 3, denied +3, allowed unchanged", c0, c1)
	}
	if scope == ScopeNetns {
		// Another cgroup of the container's own namespace: dropped too.
		for i, err := range send(tp.other) {
			if err == nil {
				t.Errorf("%s from another cgroup (netns scope) was sent", srcRouteProbes[i])
			}
		}
		c2 := countersT(t, tp, p)
		if c2.SourceRouted.Packets != 6 || c2.DeniedOutside.Packets < c1.DeniedOutside.Packets+3 {
			t.Errorf("outside the cgroup: %+v → %+v; want source_routed 6, denied_outside +3", c1, c2)
		}
		c1 = c2
	}
	if err := ReadBack(ctxT(t), tp.client.FD, p); err != nil {
		t.Errorf("ReadBack after traffic: %v", err)
	}

	// Control: without the source-route rules the same packets leave,
	// accepted as the allowed first hop's tuple.
	out := tp.client.Nft(t, "-a", "list", "chain", "inet", p.Table, "output")
	hs := regexp.MustCompile(`comment "gensee: deny (?:ipv4 (?:loose|strict) source route|ipv6 routing header)[^"]*" # handle (\d+)`).FindAllStringSubmatch(out, -1)
	if len(hs) == 0 {
		t.Fatalf("no source-route rules in\n%s", out)
	}
	for _, h := range hs {
		tp.client.Nft(t, "delete", "rule", "inet", p.Table, "output", "handle", h[1])
	}
	for i, err := range send(tp.ctr) {
		if err != nil {
			t.Errorf("control: %s without the rules: %v, want sent", srcRouteProbes[i], err)
		}
	}
	if c3 := countersT(t, tp, p); c3.Allowed.Packets < c1.Allowed.Packets+3 {
		t.Errorf("control: allowed %+v → %+v; want +3 (the table matched only the first hop)", c1.Allowed, c3.Allowed)
	}
}
