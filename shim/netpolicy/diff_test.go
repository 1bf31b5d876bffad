package netpolicy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

// asDumped turns a built ruleset into what a dump of it returns: rules
// re-decoded from their netlink encoding (as the kernel echoes them, minus
// what it does not echo), counters on counter-set elements, handles.
func asDumped(rs *ruleset) *ruleset {
	out := &ruleset{table: &nftables.Table{Name: rs.table.Name, Family: rs.table.Family}, chains: rs.chains, counters: rs.counters}
	for _, s := range rs.sets {
		c := *s.set
		se := &setElems{set: &c, exprs: s.exprs}
		for _, e := range s.elems {
			if slices.Contains(s.exprs, "counter") {
				e.Counter = &expr.Counter{}
			}
			se.elems = append(se.elems, e)
		}
		out.sets = append(out.sets, se)
	}
	for i, r := range rs.rules {
		out.rules = append(out.rules, reencode(r, uint64(i+4)))
	}
	return out
}

// reencode marshals a built rule's expressions as install sends them and
// decodes them with the dump decoder.
func reencode(r *rule, handle uint64) *rule {
	var list []netlink.Attribute
	for _, e := range r.nft.Exprs {
		b, err := expr.Marshal(unix.NFPROTO_INET, e)
		if err != nil {
			panic(err)
		}
		list = append(list, netlink.Attribute{Type: unix.NFTA_LIST_ELEM | unix.NLA_F_NESTED, Data: b})
	}
	exprs, _ := netlink.MarshalAttributes(list)
	b, _ := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: []byte(r.nft.Table.Name + "\x00")},
		{Type: unix.NFTA_RULE_CHAIN, Data: []byte(r.chain + "\x00")},
		{Type: unix.NFTA_RULE_HANDLE, Data: []byte{0, 0, 0, 0, 0, 0, 0, byte(handle)}},
		{Type: unix.NFTA_RULE_EXPRESSIONS | unix.NLA_F_NESTED, Data: exprs},
		{Type: unix.NFTA_RULE_USERDATA, Data: r.userData},
	})
	got, _, err := decodeRule(b)
	if err != nil {
		panic(err)
	}
	return got
}

func exactPlan(t *testing.T) *Plan {
	t.Helper()
	p, err := NewPlan("op1", spec.Network{Mode: spec.NetworkAllowExact, Loopback: "allow", Allow: []spec.AllowRule{
		{IP: "192.0.2.10", Proto: "tcp", Port: 443},
		{IP: "192.0.2.11", Proto: "udp", Port: 53},
		{IP: "2001:db8::1", Proto: "tcp", Port: 443},
		{IP: "192.0.2.12", Proto: "icmp"},
		{IP: "2001:db8::2", Proto: "icmpv6"},
	}}, testCG)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDiffEqual(t *testing.T) {
	p := exactPlan(t)
	if d := diff(build(p), asDumped(build(p))); len(d) > 0 {
		t.Fatalf("a faithful dump differs: %v", d)
	}
}

func TestDiffFindsDrift(t *testing.T) {
	p := exactPlan(t)
	otherCG := testCG
	otherCG.ID = 99
	p2 := *p
	p2.Cgroup = otherCG
	for _, tc := range []struct {
		name   string
		mutate func(got *ruleset)
		want   string
	}{
		{"dormant", func(g *ruleset) { g.table.Flags = unix.NFT_TABLE_F_DORMANT }, "dormant"},
		{"policy drop", func(g *ruleset) {
			c := *g.chains[0]
			drop := nftables.ChainPolicyDrop
			c.Policy = &drop
			g.chains = []*nftables.Chain{&c}
		}, "chain output is {type filter hook 3 priority 0 policy 0}"},
		{"chain missing", func(g *ruleset) { g.chains = nil }, "chain output is missing"},
		{"extra rule", func(g *ruleset) {
			extra := &rule{chain: "output", handle: 99, exprs: []string{canon(&expr.Verdict{Kind: expr.VerdictAccept})}}
			g.rules = append([]*rule{extra}, g.rules...)
		}, "extra rule at position 0 (handle 99"},
		{"rule missing", func(g *ruleset) { g.rules = slices.Delete(g.rules, len(g.rules)-2, len(g.rules)-1) }, "(gensee: deny) is missing"},
		{"last rule missing", func(g *ruleset) { g.rules = g.rules[:len(g.rules)-1] }, "(gensee: deny, no owning process) is missing"},
		{"rule changed", func(g *ruleset) {
			g.rules[len(g.rules)-2].exprs[0] = canon(&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 7, Register: 1})
		}, "(gensee: deny) changed"},
		{"spoof check gone", func(g *ruleset) {
			i := slices.IndexFunc(g.rules, func(r *rule) bool { return ruleName(r) == "gensee: deny non-local source" })
			g.rules = slices.Delete(g.rules, i, i+1)
		}, "(gensee: deny non-local source) is missing"},
		{"spoof check loosened to daddr", func(g *ruleset) {
			i := slices.IndexFunc(g.rules, func(r *rule) bool { return ruleName(r) == "gensee: deny non-local source" })
			g.rules[i].exprs[2] = canon(&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true})
		}, "(gensee: deny non-local source) changed"},
		{"unknown expression", func(g *ruleset) {
			g.rules[0].exprs = append(g.rules[0].exprs, decodeExpr("rt", []byte{1, 2}))
		}, "unknown rt 0102"},
		{"rules swapped", func(g *ruleset) {
			n := len(g.rules)
			g.rules[n-1], g.rules[n-2] = g.rules[n-2], g.rules[n-1]
		}, "gensee: "},
		{"counter gone", func(g *ruleset) { g.counters = g.counters[:1] }, "named counters are [allowed], want [allowed denied denied_kernel source_routed spoofed]"},
		{"set missing", func(g *ruleset) { g.sets = g.sets[:1] }, "set allow4 is missing"},
		{"set type", func(g *ruleset) { g.sets[1].set.KeyType = nftables.TypeIPAddr }, "set allow4 is {type \"ipv4_addr\""},
		{"catch-all element", func(g *ruleset) {
			g.sets[1].elems = append(g.sets[1].elems, elem{Counter: &expr.Counter{}})
		}, "catch-all element"},
		{"used element without counter", func(g *ruleset) {
			g.sets[2].elems = append(g.sets[2].elems, elem{Key: g.sets[1].elems[0].Key})
		}, "set allow4_used: element 192.0.2.10:443/tcp has no counter"},
		{"used element not allowed", func(g *ruleset) {
			g.sets[2].elems = append(g.sets[2].elems, elem{Key: []byte{192, 0, 2, 99, 6, 0, 0, 0, 0, 22, 0, 0}, Counter: &expr.Counter{}})
		}, "set allow4_used has 1 elements not in allow4: 192.0.2.99:22/tcp"},
		{"used set declares a counter", func(g *ruleset) { g.sets[2].exprs = []string{"counter packets 9 bytes 900"} }, "set allow4_used gives its elements [counter packets 9 bytes 900], want []"},
		{"element expression", func(g *ruleset) { g.sets[0].odd = map[int]string{0: "expressions [quota]"} }, "set cg: element cgroup id 4242 carries expressions [quota]"},
		{"used set gone", func(g *ruleset) { g.sets = slices.Delete(g.sets, 2, 3) }, "set allow4_used is missing"},
		{"used set not dynamic", func(g *ruleset) { g.sets[2].set.Dynamic = false }, "set allow4_used is {"},
		{"allowed element with a counter", func(g *ruleset) { g.sets[1].elems[0].Counter = &expr.Counter{} }, "element 192.0.2.10:443/tcp carries a counter"},
		{"element lost", func(g *ruleset) { g.sets[1].elems = g.sets[1].elems[1:] }, "set allow4 lacks 1 elements: 192.0.2.10:443/tcp"},
		{"other cgroup", func(g *ruleset) { g.sets[0] = asDumped(build(&p2)).sets[0] }, "set cg lacks 1 elements: cgroup id 4242; set cg has 1 extra elements: cgroup id 99"},
		{"extra set", func(g *ruleset) {
			g.sets = append(g.sets, &setElems{set: &nftables.Set{Name: "__set0", Anonymous: true, KeyType: nftables.TypeIPAddr}})
		}, "extra set __set0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := asDumped(build(p))
			tc.mutate(got)
			d := diff(build(p), got)
			err := &DriftError{Table: p.Table, Diffs: d}
			if len(d) == 0 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("diff = %v, want it to mention %q", d, tc.want)
			}
		})
	}
}

// TestDiffUsedSets: what the rules add to a used set, in any number and
// order, repeated by a dump that raced an add, is no drift.
func TestDiffUsedSets(t *testing.T) {
	p := exactPlan(t)
	got := asDumped(build(p))
	allow4, used4 := got.sets[1], got.sets[2]
	for _, i := range []int{1, 0, 1} {
		used4.elems = append(used4.elems, elem{Key: allow4.elems[i].Key, Counter: &expr.Counter{Packets: 1, Bytes: 60}})
	}
	if d := diff(build(p), got); len(d) > 0 {
		t.Fatalf("a used set with keys of its set differs: %v", d)
	}
}

// useAll fills every used set of a dumped ruleset with the keys of the set
// it counts for, the i-th counting i+1 packets.
func useAll(got *ruleset) {
	byName := map[string]*setElems{}
	for _, s := range got.sets {
		byName[s.set.Name] = s
	}
	for _, s := range got.sets {
		in := byName[strings.TrimSuffix(s.set.Name, usedSuffix)]
		if !strings.HasSuffix(s.set.Name, usedSuffix) || in == nil {
			continue
		}
		for i, e := range in.elems {
			s.elems = append(s.elems, elem{Key: e.Key, Counter: &expr.Counter{Packets: uint64(i + 1), Bytes: 10}})
		}
	}
}

func TestCountersOf(t *testing.T) {
	p := exactPlan(t)
	got := asDumped(build(p))
	got.counters = []*nftables.CounterObj{{Name: "allowed", Packets: 7, Bytes: 500}, {Name: "denied", Packets: 2, Bytes: 120}, {Name: "denied_kernel", Packets: 1, Bytes: 40}, {Name: "spoofed", Packets: 1, Bytes: 60}, {Name: "source_routed"}}
	useAll(got)
	c, err := countersOf(build(p), got)
	if err != nil {
		t.Fatal(err)
	}
	if c.Allowed != (Count{7, 500}) || c.Denied != (Count{2, 120}) || c.DeniedKernel != (Count{1, 40}) || c.Spoofed != (Count{1, 60}) {
		t.Errorf("counters = %+v", c)
	}
	if len(c.Tuples) != len(p.Allow) {
		t.Fatalf("tuples = %+v, want %d", c.Tuples, len(p.Allow))
	}
	var names []string
	for _, tc := range c.Tuples {
		if tc.Packets == 0 {
			t.Errorf("tuple %v has no count", tc.Tuple)
		}
		names = append(names, tc.Tuple.String())
	}
	slices.Sort(names)
	var want []string
	for _, tu := range p.Allow {
		want = append(want, tu.String())
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("tuples %q, want %q", names, want)
	}
	// More counted per tuple than by the named counters: counts set
	// from outside the rules.
	got.counters[0].Packets = 6
	if _, err := countersOf(build(p), got); err != nil {
		t.Errorf("tuple counts summing to allowed: err = %v", err)
	}
	for _, allowed := range []Count{{5, 500}, {6, 49}} { // packets, then bytes, above
		got.counters[0].Packets, got.counters[0].Bytes = allowed.Packets, allowed.Bytes
		c, err := countersOf(build(p), got)
		if err != nil || c.Tuples != nil || c.Allowed != allowed || c.Denied != (Count{2, 120}) || !strings.Contains(c.ElementsWithheld, "exceed allowed and allowed_outside") {
			t.Errorf("tuple counts above allowed %+v: %+v, %v; want the named counters, no tuple counts, and why", allowed, c, err)
		}
	}
	got.counters[0].Packets, got.counters[0].Bytes = 7, 500
	got.counters = got.counters[:1]
	if _, err := countersOf(build(p), got); err == nil {
		t.Error("missing denied counter: want error")
	}
}

// BenchmarkDiffIntact is the diff every read-back of an intact table pays:
// deny_all, and the contract cap of 1024 tuples.
func BenchmarkDiffIntact(b *testing.B) {
	deny, err := NewPlan("op1", spec.Network{Mode: spec.NetworkDenyAll}, testCG)
	if err != nil {
		b.Fatal(err)
	}
	var allow []spec.AllowRule
	for i := range 1024 {
		allow = append(allow, spec.AllowRule{IP: netip.AddrFrom4([4]byte{198, 18, byte(i / 256), byte(i % 256)}).String(), Proto: "tcp", Port: 443})
	}
	exact, err := NewPlan("op1", spec.Network{Mode: spec.NetworkAllowExact, Allow: allow}, testCG)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *Plan
	}{{"deny_all", deny}, {"allow_1024", exact}} {
		want, got := build(c.p), asDumped(build(c.p))
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if d := diff(want, got); len(d) > 0 {
					b.Fatal(d)
				}
			}
		})
	}
}

// decodeExpr keeps its renderings: the same bytes render the same, kept
// or not, and the cache stops growing at exprCacheMax.
func TestDecodeExprCache(t *testing.T) {
	for i := range exprCacheMax + 10 {
		data := []byte{0, 0, 0, byte(i >> 8), byte(i)}
		want := renderExpr("rt", data)
		if got := decodeExpr("rt", data); got != want {
			t.Fatalf("first rendering %q, want %q", got, want)
		}
		if got := decodeExpr("rt", data); got != want {
			t.Fatalf("kept rendering %q, want %q", got, want)
		}
	}
	exprCache.mu.Lock()
	n := len(exprCache.m)
	exprCache.mu.Unlock()
	if n > exprCacheMax {
		t.Fatalf("cache holds %d renderings, bound %d", n, exprCacheMax)
	}
}
