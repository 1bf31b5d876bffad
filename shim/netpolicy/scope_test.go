package netpolicy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

func netnsPlan(t *testing.T, n spec.Network) *Plan {
	t.Helper()
	p, err := NewPlanScoped("op1", n, testCG, ScopeNetns)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func exactNetwork() spec.Network {
	return spec.Network{Mode: spec.NetworkAllowExact, Loopback: "allow", Allow: []spec.AllowRule{
		{IP: "192.0.2.10", Proto: "tcp", Port: 443},
		{IP: "192.0.2.11", Proto: "udp", Port: 53},
		{IP: "2001:db8::1", Proto: "tcp", Port: 443},
		{IP: "192.0.2.12", Proto: "icmp"},
		{IP: "2001:db8::2", Proto: "icmpv6"},
	}}
}

func TestNewPlanScoped(t *testing.T) {
	deny := spec.Network{Mode: spec.NetworkDenyAll}
	p, err := NewPlan("op1", deny, testCG)
	if err != nil || p.Scope != ScopeCgroup || p.LogPrefixOutside != "" {
		t.Fatalf("NewPlan = %+v, %v; want cgroup scope, no outside prefix", p, err)
	}
	p = netnsPlan(t, deny)
	if p.Scope != ScopeNetns || p.LogPrefixOutside != "gensee outside op1 " || p.LogPrefix != "gensee deny op1 " || len(p.Implicit) != 0 {
		t.Fatalf("netns deny_all plan = %+v", p)
	}
	p = netnsPlan(t, exactNetwork())
	if !slices.ContainsFunc(p.Implicit, func(s string) bool { return strings.HasPrefix(s, "netns scope:") }) {
		t.Fatalf("Implicit = %q, want the netns-scope allowance recorded", p.Implicit)
	}
	for _, s := range []Scope{"", "host", "Netns"} {
		if _, err := NewPlanScoped("op1", deny, testCG, s); err == nil || !strings.Contains(err.Error(), "scope") {
			t.Errorf("scope %q: err = %v, want refusal", s, err)
		}
	}
	// A plan whose scope was changed by hand is refused before the kernel.
	p.Scope = ""
	f := &fakeKernel{}
	if _, err := (engine{k: f}).apply(context.Background(), p, nil); err == nil || f.installed != nil {
		t.Fatalf("apply of a plan without scope = %v, installed %v", err, f.installed != nil)
	}
	if _, err := (engine{k: f}).counters(context.Background(), p); err == nil {
		t.Fatal("counters of a plan without scope: want refusal")
	}
}

func TestBuildNetnsDenyAll(t *testing.T) {
	p := netnsPlan(t, spec.Network{Mode: spec.NetworkDenyAll})
	rs := build(p)
	if ch := rs.chains[0]; *ch.Policy != nftables.ChainPolicyDrop {
		t.Fatalf("chain = %s, want policy drop", chainString(ch))
	}
	var names []string
	for _, c := range rs.counters {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"allowed", "denied", "denied_kernel", "spoofed", "source_routed", "allowed_outside", "denied_outside"}) {
		t.Fatalf("counters = %q", names)
	}
	wantComments := []string{
		ownComment,
		"gensee: log non-local source", "gensee: deny non-local source", "gensee: deny non-local source, no owning process",
		"gensee: deny ipv4 loose source route", "gensee: deny ipv4 loose source route, no owning process", "gensee: deny ipv4 strict source route", "gensee: deny ipv4 strict source route, no owning process", "gensee: deny ipv6 routing header", "gensee: deny ipv6 routing header, no owning process",
		"gensee: log denied", "gensee: deny", "gensee: deny, no owning process",
		"gensee: log non-local source, outside the cgroup", "gensee: deny non-local source, outside the cgroup",
		"gensee: deny ipv4 loose source route, outside the cgroup", "gensee: deny ipv4 strict source route, outside the cgroup", "gensee: deny ipv6 routing header, outside the cgroup",
		"gensee: log denied, outside the cgroup", "gensee: deny, outside the cgroup",
	}
	if got := comments(rs); !slices.Equal(got, wantComments) {
		t.Fatalf("rules:\n got %q\nwant %q", got, wantComments)
	}
	// The cgroup's rules are exactly the cgroup scope's.
	cgroupOnly := build(mustPlan(t, spec.Network{Mode: spec.NetworkDenyAll}))
	for i, r := range cgroupOnly.rules {
		if !slices.Equal(rs.rules[i].canonExprs(), r.canonExprs()) {
			t.Errorf("rule %d differs from cgroup scope:\n got %q\nwant %q", i, rs.rules[i].canonExprs(), r.canonExprs())
		}
	}
	limit := &expr.Limit{Type: expr.LimitTypePkts, Rate: 20, Unit: expr.LimitTimeSecond, Burst: 40}
	logOut := &expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX, Group: 2604, Data: []byte("gensee outside op1 ")}
	want := [][]string{
		canonAll(slices.Concat(notLocalSource(), []expr.Any{limit, logOut})...),
		canonAll(slices.Concat(notLocalSource(), []expr.Any{&expr.Objref{Type: 1, Name: "spoofed"}, &expr.Objref{Type: 1, Name: "denied_outside"}, &expr.Verdict{Kind: expr.VerdictDrop}})...),
	}
	want = append(want, srcRouteWant(nil, nil)...)
	want = append(want, [][]string{
		canonAll(
			&expr.Limit{Type: expr.LimitTypePkts, Rate: 20, Unit: expr.LimitTimeSecond, Burst: 40},
			&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX, Group: 2604, Data: []byte("gensee outside op1 ")},
		),
		canonAll(&expr.Objref{Type: 1, Name: "denied_outside"}, &expr.Verdict{Kind: expr.VerdictDrop}),
	}...)
	for i, w := range want {
		if got := rs.rules[13+i].canonExprs(); !slices.Equal(got, w) {
			t.Errorf("outside rule %d:\n got %q\nwant %q", i, got, w)
		}
	}
}

func mustPlan(t *testing.T, n spec.Network) *Plan {
	t.Helper()
	p, err := NewPlan("op1", n, testCG)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuildNetnsAllowExact(t *testing.T) {
	p := netnsPlan(t, exactNetwork())
	rs := build(p)
	cgroupOnly := build(mustPlan(t, exactNetwork()))
	n := len(cgroupOnly.rules)
	for i, r := range cgroupOnly.rules {
		if !slices.Equal(rs.rules[i].canonExprs(), r.canonExprs()) || ruleName(rs.rules[i]) != ruleName(r) {
			t.Errorf("rule %d differs from cgroup scope: %q", i, rs.rules[i].canonExprs())
		}
	}
	// The same sets, once: the outside rules look up the cgroup rules' sets.
	if len(rs.sets) != len(cgroupOnly.sets) {
		t.Fatalf("%d sets, cgroup scope has %d", len(rs.sets), len(cgroupOnly.sets))
	}
	ids := map[string]uint32{}
	for _, s := range rs.sets {
		ids[s.set.Name] = s.set.ID
	}
	outside := rs.rules[n:]
	wantOut := []string{
		"gensee: icmpv6 duplicate address detection (source ::), outside the cgroup",
		"gensee: log non-local source, outside the cgroup", "gensee: deny non-local source, outside the cgroup",
		"gensee: deny ipv4 loose source route, outside the cgroup", "gensee: deny ipv4 strict source route, outside the cgroup", "gensee: deny ipv6 routing header, outside the cgroup",
		"gensee: loopback allowed by contract, outside the cgroup",
		"gensee: count per element, allowed ipv4 tuples, outside the cgroup", "gensee: allowed ipv4 tuples, outside the cgroup", "gensee: count per element, replies from allowed ipv4 tuples, outside the cgroup", "gensee: replies from allowed ipv4 tuples, outside the cgroup",
		"gensee: count per element, allowed ipv6 tuples, outside the cgroup", "gensee: allowed ipv6 tuples, outside the cgroup", "gensee: count per element, replies from allowed ipv6 tuples, outside the cgroup", "gensee: replies from allowed ipv6 tuples, outside the cgroup",
		"gensee: count per element, allowed icmp destinations, outside the cgroup", "gensee: allowed icmp destinations, outside the cgroup", "gensee: count per element, allowed icmpv6 destinations, outside the cgroup", "gensee: allowed icmpv6 destinations, outside the cgroup",
		"gensee: icmpv6 neighbor discovery for allowed ipv6, outside the cgroup",
		"gensee: log denied, outside the cgroup", "gensee: deny, outside the cgroup",
	}
	if got := comments(&ruleset{rules: outside}); !slices.Equal(got, wantOut) {
		t.Fatalf("outside rules:\n got %q\nwant %q", got, wantOut)
	}
	for i, r := range outside {
		es := r.nft.Exprs
		for _, e := range es {
			switch v := e.(type) {
			case *expr.Socket:
				t.Errorf("outside rule %d matches a socket: %q", i, r.canonExprs())
			case *expr.Lookup:
				if v.SetName == "cg" || v.Invert || ids[v.SetName] != v.SetID {
					t.Errorf("outside rule %d looks up %s/%d", i, v.SetName, v.SetID)
				}
			case *expr.Cmp:
				if v.Op != expr.CmpOpEq && !(i == 1 || i == 2) {
					t.Errorf("outside rule %d uses a non-equality comparison", i)
				}
			}
		}
		if i >= len(outside)-2 || i >= 1 && i <= 5 {
			continue // the drops; source routes: TestBuildSourceRouted
		}
		// Each outside accept is its cgroup twin minus the cgroup match
		// and with the other counter; each counting rule its twin minus
		// the cgroup match. The cgroup's copy has one more non-local
		// source rule and three more source-route rules (no owning
		// process), and the label rule first.
		j := i + 1
		if i > 2 {
			j += 4
		}
		twin := cgroupOnly.rules[j].canonExprs()
		if strings.HasPrefix(ruleName(r), countPrefix) {
			if !slices.Equal(r.canonExprs(), twin[2:]) {
				t.Errorf("outside counting rule %d:\n got %q\nwant the tail of %q", i, r.canonExprs(), twin)
			}
			continue
		}
		if o, ok := es[len(es)-2].(*expr.Objref); !ok || o.Name != "allowed_outside" {
			t.Errorf("outside accept %d does not count allowed_outside: %q", i, r.canonExprs())
		}
		if !slices.Equal(r.canonExprs()[:len(r.canonExprs())-2], twin[2:len(twin)-2]) {
			t.Errorf("outside accept %d:\n got %q\nwant the tail of %q", i, r.canonExprs(), twin)
		}
	}
	checkCountedPairs(t, rs)
	if last := rs.rules[len(rs.rules)-1].nft.Exprs; len(last) != 2 {
		t.Errorf("last rule is not an unconditional drop: %q", rs.rules[len(rs.rules)-1].canonExprs())
	}
	if d := diff(rs, asDumped(build(p))); len(d) > 0 {
		t.Fatalf("a faithful dump differs: %v", d)
	}
}

func TestDiffNetnsDrift(t *testing.T) {
	p := netnsPlan(t, exactNetwork())
	for _, tc := range []struct {
		name   string
		mutate func(got *ruleset)
		want   string
	}{
		{"policy accept", func(g *ruleset) {
			c := *g.chains[0]
			accept := nftables.ChainPolicyAccept
			c.Policy = &accept
			g.chains = []*nftables.Chain{&c}
		}, "chain output is {type filter hook 3 priority 0 policy 1}, want {type filter hook 3 priority 0 policy 0}"},
		{"outside drop missing", func(g *ruleset) { g.rules = g.rules[:len(g.rules)-1] }, "(gensee: deny, outside the cgroup) is missing"},
		{"outside counter gone", func(g *ruleset) { g.counters = g.counters[:4] }, "want [allowed allowed_outside denied denied_kernel denied_outside source_routed spoofed]"},
		{"outside spoof check gone", func(g *ruleset) {
			i := slices.IndexFunc(g.rules, func(r *rule) bool { return ruleName(r) == "gensee: deny non-local source"+outsideNote })
			g.rules = slices.Delete(g.rules, i, i+1)
		}, "(gensee: deny non-local source, outside the cgroup) is missing"},
		{"cgroup scope table", func(g *ruleset) { *g = *asDumped(build(mustPlan(t, exactNetwork()))) }, "policy 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := asDumped(build(p))
			tc.mutate(got)
			d := diff(build(p), got)
			if err := (&DriftError{Table: p.Table, Diffs: d}); len(d) == 0 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("diff = %v, want it to mention %q", d, tc.want)
			}
		})
	}
}

func TestCountersOfNetns(t *testing.T) {
	p := netnsPlan(t, spec.Network{Mode: spec.NetworkDenyAll})
	got := asDumped(build(p))
	got.counters = []*nftables.CounterObj{
		{Name: "allowed"}, {Name: "denied", Packets: 2, Bytes: 120}, {Name: "denied_kernel"}, {Name: "spoofed"}, {Name: "source_routed"},
		{Name: "allowed_outside", Packets: 4, Bytes: 240}, {Name: "denied_outside", Packets: 3, Bytes: 180},
	}
	c, err := countersOf(build(p), got)
	if err != nil {
		t.Fatal(err)
	}
	if c.Denied != (Count{2, 120}) || c.AllowedOutside != (Count{4, 240}) || c.DeniedOutside != (Count{3, 180}) {
		t.Errorf("counters = %+v", c)
	}
	got.counters = got.counters[:6]
	if _, err := countersOf(build(p), got); err == nil || !strings.Contains(err.Error(), "denied_outside") {
		t.Errorf("missing denied_outside: err = %v", err)
	}
}
