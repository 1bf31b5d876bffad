package netpolicy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

var testCG = CgroupRef{Path: "/gensee/c1", ID: 4242, Level: 2}

func TestNewPlan(t *testing.T) {
	allow := func(r ...spec.AllowRule) spec.Network {
		return spec.Network{Mode: spec.NetworkAllowExact, Allow: r}
	}
	for _, tc := range []struct {
		name string
		opID string
		n    spec.Network
		cg   CgroupRef
		err  string // substring; empty: success
	}{
		{name: "deny_all", n: spec.Network{Mode: spec.NetworkDenyAll}},
		{name: "deny_all loopback allow", n: spec.Network{Mode: spec.NetworkDenyAll, Loopback: "allow"}},
		{name: "deny_all with tuples", n: spec.Network{Mode: spec.NetworkDenyAll, Allow: []spec.AllowRule{{IP: "192.0.2.1", Proto: "tcp", Port: 1}}}, err: "deny_all takes no allow tuples"},
		{name: "unknown mode", n: spec.Network{Mode: "allow_all"}, err: `network.mode: "allow_all"`},
		{name: "empty mode", n: spec.Network{}, err: "network.mode"},
		{name: "bad loopback", n: spec.Network{Mode: spec.NetworkDenyAll, Loopback: "yes"}, err: "network.loopback"},
		{name: "allow_exact empty", n: allow(), err: "at least one tuple"},
		{name: "tcp", n: allow(spec.AllowRule{IP: "192.0.2.10", Proto: "tcp", Port: 443})},
		{name: "hostname", n: allow(spec.AllowRule{IP: "example.com", Proto: "tcp", Port: 443}), err: "network.allow[0]: ip \"example.com\": not an IP address"},
		{name: "cidr", n: allow(spec.AllowRule{IP: "192.0.2.0/24", Proto: "tcp", Port: 443}), err: "CIDR"},
		{name: "single-address cidr", n: allow(spec.AllowRule{IP: "192.0.2.1/32", Proto: "tcp", Port: 443}), err: "CIDR"},
		{name: "zone", n: allow(spec.AllowRule{IP: "fe80::1%eth0", Proto: "tcp", Port: 443}), err: "zoned"},
		{name: "unspecified", n: allow(spec.AllowRule{IP: "::", Proto: "tcp", Port: 443}), err: "unspecified"},
		{name: "leading zeros", n: allow(spec.AllowRule{IP: "192.0.2.010", Proto: "tcp", Port: 443}), err: "not an IP address"},
		{name: "port 0", n: allow(spec.AllowRule{IP: "192.0.2.1", Proto: "udp"}), err: "port 0: udp needs a port"},
		{name: "port too big", n: allow(spec.AllowRule{IP: "192.0.2.1", Proto: "tcp", Port: 65536}), err: "1..65535"},
		{name: "negative port", n: allow(spec.AllowRule{IP: "192.0.2.1", Proto: "tcp", Port: -1}), err: "1..65535"},
		{name: "icmp with port", n: allow(spec.AllowRule{IP: "192.0.2.1", Proto: "icmp", Port: 8}), err: "has no ports"},
		{name: "icmp v6 address", n: allow(spec.AllowRule{IP: "2001:db8::1", Proto: "icmp"}), err: "use icmpv6"},
		{name: "icmpv6 v4 address", n: allow(spec.AllowRule{IP: "192.0.2.1", Proto: "icmpv6"}), err: "use icmp"},
		{name: "unknown proto", n: allow(spec.AllowRule{IP: "192.0.2.1", Proto: "sctp", Port: 1}), err: `proto "sctp"`},
		{name: "upper-case proto", n: allow(spec.AllowRule{IP: "192.0.2.1", Proto: "TCP", Port: 1}), err: `proto "TCP"`},
		{name: "second rule bad", n: allow(spec.AllowRule{IP: "192.0.2.1", Proto: "tcp", Port: 1}, spec.AllowRule{IP: "x", Proto: "tcp", Port: 1}), err: "network.allow[1]"},
		{name: "empty op id", opID: "-", err: "empty operation id"},
		{name: "op id with space", opID: "a b", err: "operation id"},
		{name: "op id with dot", opID: "a.b", err: "operation id"},
		{name: "cgroup id 0", cg: CgroupRef{Level: 1}, err: "cgroup id is 0"},
		{name: "root cgroup", cg: CgroupRef{ID: 1, Path: "/"}, err: "root cgroup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.opID
			switch op {
			case "":
				op = "0123456789abcdef"
			case "-":
				op = ""
			}
			cg := tc.cg
			if cg == (CgroupRef{}) {
				cg = testCG
			}
			p, err := NewPlan(op, tc.n, cg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Table != "gensee_0123456789ab" || p.Mode != tc.n.Mode || p.Cgroup != cg || p.LogGroup != DefaultLogGroup {
				t.Fatalf("plan = %+v", p)
			}
			if p.Loopback != (tc.n.Loopback == "allow") {
				t.Fatalf("Loopback = %v", p.Loopback)
			}
		})
	}
}

func TestNewPlanNormalizes(t *testing.T) {
	n := spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{
		{IP: "2001:db8::2", Proto: "tcp", Port: 443},
		{IP: "::ffff:192.0.2.9", Proto: "udp", Port: 53}, // leaves as IPv4
		{IP: "192.0.2.10", Proto: "tcp", Port: 443},
		{IP: "192.0.2.10", Proto: "tcp", Port: 443}, // duplicate
		{IP: "2001:DB8::2", Proto: "icmpv6"},
		{IP: "192.0.2.10", Proto: "tcp", Port: 80},
	}}
	p, err := NewPlan("short", n, testCG)
	if err != nil {
		t.Fatal(err)
	}
	if p.Table != "gensee_short" {
		t.Errorf("Table = %q", p.Table)
	}
	var got []string
	for _, tu := range p.Allow {
		got = append(got, tu.String())
	}
	want := []string{"192.0.2.9:53/udp", "192.0.2.10:80/tcp", "192.0.2.10:443/tcp", "[2001:db8::2]:443/tcp", "2001:db8::2 icmpv6"}
	if !slices.Equal(got, want) {
		t.Errorf("Allow = %q, want %q", got, want)
	}
	if !p.HasIPv6() || len(p.Implicit) != 2 {
		t.Errorf("HasIPv6 = %v, Implicit = %q", p.HasIPv6(), p.Implicit)
	}
	if p.Allow[0].Addr != netip.MustParseAddr("192.0.2.9") {
		t.Errorf("mapped address not unmapped: %v", p.Allow[0].Addr)
	}
}

func TestCheckTable(t *testing.T) {
	for name, ok := range map[string]bool{
		"gensee_0123456789ab": true, "gensee_x": true, "gensee_a-b_c": true,
		"gensee_": false, "gensee_0123456789abc": false, "filter": false, "gensee_a b": false, "Gensee_x": false,
	} {
		if err := checkTable(name); (err == nil) != ok {
			t.Errorf("checkTable(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// FuzzNewPlan: whatever a contract says, a plan either refuses it or holds
// only exact, well-formed tuples.
func FuzzNewPlan(f *testing.F) {
	f.Add("192.0.2.1", "tcp", 443, "allow")
	f.Add("2001:db8::1", "icmpv6", 0, "")
	f.Add("::ffff:1.2.3.4", "udp", 53, "deny")
	f.Add("example.com", "tcp", 80, "")
	f.Fuzz(func(t *testing.T, ip, proto string, port int, loopback string) {
		n := spec.Network{Mode: spec.NetworkAllowExact, Loopback: loopback, Allow: []spec.AllowRule{{IP: ip, Proto: proto, Port: port}}}
		p, err := NewPlan("fuzz", n, testCG)
		if err != nil {
			return
		}
		if len(p.Allow) != 1 {
			t.Fatalf("Allow = %v", p.Allow)
		}
		tu := p.Allow[0]
		if !tu.Addr.IsValid() || tu.Addr.Is4In6() || tu.Addr.Zone() != "" || tu.Addr.IsUnspecified() {
			t.Fatalf("bad address %v from %q", tu.Addr, ip)
		}
		switch tu.Proto {
		case ProtoTCP, ProtoUDP:
			if tu.Port == 0 || int(tu.Port) != port {
				t.Fatalf("port %d from %d", tu.Port, port)
			}
		case ProtoICMP, ProtoICMPv6:
			if tu.Port != 0 || port != 0 || (tu.Proto == ProtoICMP) != tu.Addr.Is4() {
				t.Fatalf("icmp tuple %v from %q/%d", tu, proto, port)
			}
		default:
			t.Fatalf("proto %d from %q", tu.Proto, proto)
		}
		if d := diff(build(p), asDumped(build(p))); len(d) > 0 {
			t.Fatalf("plan does not equal itself: %v", d)
		}
		pn, err := NewPlanScoped("fuzz", n, testCG, ScopeNetns)
		if err != nil {
			t.Fatalf("netns scope refuses what cgroup scope accepts: %v", err)
		}
		if d := diff(build(pn), asDumped(build(pn))); len(d) > 0 {
			t.Fatalf("netns plan does not equal itself: %v", d)
		}
		if d := diff(build(pn), asDumped(build(p))); len(d) == 0 {
			t.Fatal("a cgroup-scope table reads back equal to the netns plan")
		}
	})
}
