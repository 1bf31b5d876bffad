package netpolicy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

func serveNetwork(mode string, s ...spec.ServeRule) spec.Network {
	n := spec.Network{Mode: mode, Serve: s}
	if mode == spec.NetworkAllowExact {
		n.Allow = []spec.AllowRule{{IP: "192.0.2.10", Proto: "tcp", Port: 443}}
	}
	return n
}

func TestNewPlanServe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve []spec.ServeRule
		want  string // ports, or the error substring after "!"
	}{
		{"none", nil, ""},
		{"sorted, unique", []spec.ServeRule{{Proto: "udp", Port: 53}, {Proto: "tcp", Port: 8080}, {Proto: "tcp", Port: 80}, {Proto: "udp", Port: 53}, {Proto: "tcp", Port: 8080}}, "80/tcp 8080/tcp 53/udp"},
		{"highest port", []spec.ServeRule{{Proto: "tcp", Port: 65535}}, "65535/tcp"},
		{"port 0", []spec.ServeRule{{Proto: "tcp", Port: 0}}, "!network.serve[0]: port 0: serving tcp needs a port in 1..65535"},
		{"port too big", []spec.ServeRule{{Proto: "tcp", Port: 80}, {Proto: "udp", Port: 65536}}, "!network.serve[1]: port 65536"},
		{"negative port", []spec.ServeRule{{Proto: "udp", Port: -1}}, "!1..65535"},
		{"icmp", []spec.ServeRule{{Proto: "icmp", Port: 0}}, `!network.serve[0]: proto "icmp" cannot be served: use tcp or udp`},
		{"empty proto", []spec.ServeRule{{Proto: "", Port: 80}}, `!proto ""`},
		{"upper case", []spec.ServeRule{{Proto: "TCP", Port: 80}}, `!proto "TCP"`},
	} {
		for _, mode := range []string{spec.NetworkDenyAll, spec.NetworkAllowExact} {
			for _, scope := range []Scope{ScopeCgroup, ScopeNetns} {
				t.Run(tc.name+"/"+mode+"/"+string(scope), func(t *testing.T) {
					p, err := NewPlanScoped("op1", serveNetwork(mode, tc.serve...), testCG, scope)
					if msg, bad := strings.CutPrefix(tc.want, "!"); bad {
						if err == nil || !strings.Contains(err.Error(), msg) {
							t.Fatalf("err = %v, want it to contain %q", err, msg)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, s := range p.Serve {
						got = append(got, s.String())
					}
					if s := strings.Join(got, " "); s != tc.want {
						t.Fatalf("Serve = %q, want %q", s, tc.want)
					}
					line := slices.IndexFunc(p.Implicit, func(s string) bool { return strings.HasPrefix(s, "served ports (") })
					if (line >= 0) != (len(p.Serve) > 0) {
						t.Fatalf("Implicit = %q: want a served-ports line exactly when serving", p.Implicit)
					}
					if line >= 0 && !strings.Contains(p.Implicit[line], "("+strings.Join(got, ", ")+")") {
						t.Errorf("served-ports line %q does not list %q", p.Implicit[line], got)
					}
					nd := slices.ContainsFunc(p.Implicit, func(s string) bool { return strings.HasPrefix(s, "icmpv6 neighbor discovery") })
					if nd != (len(p.Serve) > 0) { // the allow_exact tuple here is IPv4
						t.Errorf("Implicit = %q: want the neighbor discovery line exactly when serving", p.Implicit)
					}
					netnsLine := slices.ContainsFunc(p.Implicit, func(s string) bool { return strings.HasPrefix(s, "netns scope:") })
					if netnsLine != (scope == ScopeNetns && (len(p.Serve) > 0 || mode == spec.NetworkAllowExact)) {
						t.Errorf("Implicit = %q: netns line wrong", p.Implicit)
					}
				})
			}
		}
	}
}

// servedExprs is what nft(8) 1.0.6 emits for `ct direction reply [tcp flags
// & (syn | ack) == syn | ack] meta l4proto . th sport @serve counter name
// "served" [counter name "served_conn"] accept`, after prefix.
// servedCount is the rule counting per port ahead of servedExprs' rule.
func servedCount(prefix []expr.Any, synack bool) []string {
	e := servedMatch(prefix, synack)
	return canonAll(append(e,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Dynset{SrcRegKey: 1, SetName: "serve_used", Operation: unix.NFT_DYNSET_OP_ADD, Exprs: []expr.Any{&expr.Counter{}}})...)
}

func servedExprs(prefix []expr.Any, synack, terminal bool) []string {
	e := append(servedMatch(prefix, synack), &expr.Objref{Type: 1, Name: "served"})
	if synack {
		e = append(e, &expr.Objref{Type: 1, Name: "served_conn"})
	}
	if terminal {
		e = append(e, &expr.Verdict{Kind: expr.VerdictAccept})
	}
	return canonAll(e...)
}

// label26 is conntrack label bit 26 as nft(8) 1.0.6 compiles `ct label
// 26` on a little-endian host (the kernel's bitmap of unsigned longs).
var label26 = []byte{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// servedMatch: ct direction reply, ct label 26, (SYN-ACK), l4proto . th
// sport ∈ serve.
func servedMatch(prefix []expr.Any, synack bool) []expr.Any {
	e := append(slices.Clone(prefix),
		&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{1}},
		&expr.Ct{Register: 1, Key: expr.CtKeyLABELS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 16, Mask: label26, Xor: make([]byte, 16)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 16)})
	if synack {
		e = append(e,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x12}})
	}
	e = append(e,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: "serve"})
	return e
}

const (
	rpfComment   = "gensee: served ports, source not routed back through its interface (reverse path)"
	rpfLoComment = "gensee: served ports, non-local source over loopback"
	labelComment = "gensee: served ports, label the flow its replies may use"
)

// servedLabelExprs is what nft(8) 1.0.6 emits for `meta l4proto . th dport
// @serve ct label set 26`, after prefix.
func servedLabelExprs(prefix []expr.Any) []string {
	return canonAll(append(slices.Clone(prefix),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: "serve"},
		&expr.Immediate{Register: 1, Data: label26},
		&expr.Ct{Register: 1, SourceRegister: true, Key: expr.CtKeyLABELS})...)
}

// servedRPFExprs is what nft(8) 1.0.6 emits for `iif != lo meta l4proto .
// th dport @serve fib saddr . iif oif missing counter name
// "served_spoofed" drop`, after prefix.
func servedRPFExprs(prefix []expr.Any) []string {
	return canonAll(append(slices.Clone(prefix),
		&expr.Meta{Key: expr.MetaKeyIIF, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, 1)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: "serve"},
		&expr.Fib{Register: 1, FlagSADDR: true, FlagIIF: true, ResultOIF: true, FlagPRESENT: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}},
		&expr.Objref{Type: 1, Name: "served_spoofed"},
		&expr.Verdict{Kind: expr.VerdictDrop})...)
}

// servedRPFLoExprs: `iif lo meta l4proto . th dport @serve fib saddr type
// != local counter name "served_spoofed" drop`, after prefix.
func servedRPFLoExprs(prefix []expr.Any) []string {
	return canonAll(append(slices.Clone(prefix),
		&expr.Meta{Key: expr.MetaKeyIIF, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, 1)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: "serve"},
		&expr.Fib{Register: 1, FlagSADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)},
		&expr.Objref{Type: 1, Name: "served_spoofed"},
		&expr.Verdict{Kind: expr.VerdictDrop})...)
}

var cgPrefix = []expr.Any{
	&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 2, Register: 1},
	&expr.Lookup{SourceRegister: 1, SetName: "cg"},
}

func TestBuildServe(t *testing.T) {
	n := serveNetwork(spec.NetworkDenyAll, spec.ServeRule{Proto: "udp", Port: 53}, spec.ServeRule{Proto: "tcp", Port: 8080})
	for _, tc := range []struct {
		scope    Scope
		comments []string
		counters []string
		// rule comment → expressions, for the serve rules
		served map[string][]string
	}{
		{ScopeCgroup, []string{
			"gensee: served ports, source not routed back through its interface (reverse path)", "gensee: served ports, non-local source over loopback", labelComment,
			ownComment, "gensee: icmpv6 duplicate address detection (source ::)",
			"gensee: log non-local source", "gensee: deny non-local source", "gensee: deny non-local source, no owning process",
			"gensee: deny ipv4 loose source route", "gensee: deny ipv4 loose source route, no owning process", "gensee: deny ipv4 strict source route", "gensee: deny ipv4 strict source route, no owning process", "gensee: deny ipv6 routing header", "gensee: deny ipv6 routing header, no owning process",
			"gensee: count per element, served connections answered", "gensee: served connections answered", "gensee: count per element, replies on served ports", "gensee: replies on served ports",
			"gensee: icmpv6 neighbor discovery for served ports",
			"gensee: log denied", "gensee: deny", "gensee: deny, no owning process",
			"gensee: count per element, count served connections answered, outside the cgroup", "gensee: count served connections answered, outside the cgroup",
		}, []string{"allowed", "denied", "denied_kernel", "spoofed", "source_routed", "served", "served_conn", "served_spoofed"}, map[string][]string{
			rpfComment:   servedRPFExprs(cgPrefix),
			rpfLoComment: servedRPFLoExprs(cgPrefix),
			labelComment: servedLabelExprs(cgPrefix),
			"gensee: count per element, served connections answered":                           servedCount(cgPrefix, true),
			"gensee: served connections answered":                                              servedExprs(cgPrefix, true, true),
			"gensee: count per element, replies on served ports":                               servedCount(cgPrefix, false),
			"gensee: replies on served ports":                                                  servedExprs(cgPrefix, false, true),
			"gensee: count per element, count served connections answered, outside the cgroup": servedCount(nil, true),
			"gensee: count served connections answered, outside the cgroup":                    servedExprs(nil, true, false), // count only, the last rule
		}},
		{ScopeNetns, []string{
			"gensee: served ports, source not routed back through its interface (reverse path)", "gensee: served ports, non-local source over loopback", labelComment,
			ownComment, "gensee: icmpv6 duplicate address detection (source ::)",
			"gensee: log non-local source", "gensee: deny non-local source", "gensee: deny non-local source, no owning process",
			"gensee: deny ipv4 loose source route", "gensee: deny ipv4 loose source route, no owning process", "gensee: deny ipv4 strict source route", "gensee: deny ipv4 strict source route, no owning process", "gensee: deny ipv6 routing header", "gensee: deny ipv6 routing header, no owning process",
			"gensee: count per element, served connections answered", "gensee: served connections answered", "gensee: count per element, replies on served ports", "gensee: replies on served ports",
			"gensee: icmpv6 neighbor discovery for served ports",
			"gensee: log denied", "gensee: deny", "gensee: deny, no owning process",
			"gensee: icmpv6 duplicate address detection (source ::), outside the cgroup",
			"gensee: log non-local source, outside the cgroup", "gensee: deny non-local source, outside the cgroup",
			"gensee: deny ipv4 loose source route, outside the cgroup", "gensee: deny ipv4 strict source route, outside the cgroup", "gensee: deny ipv6 routing header, outside the cgroup",
			"gensee: count per element, served connections answered, outside the cgroup", "gensee: served connections answered, outside the cgroup", "gensee: count per element, replies on served ports, outside the cgroup", "gensee: replies on served ports, outside the cgroup",
			"gensee: icmpv6 neighbor discovery for served ports, outside the cgroup",
			"gensee: log denied, outside the cgroup", "gensee: deny, outside the cgroup",
		}, []string{"allowed", "denied", "denied_kernel", "spoofed", "source_routed", "allowed_outside", "denied_outside", "served", "served_conn", "served_spoofed"}, map[string][]string{
			rpfComment:                            servedRPFExprs(nil),
			rpfLoComment:                          servedRPFLoExprs(nil),
			labelComment:                          servedLabelExprs(nil),
			"gensee: served connections answered": servedExprs(cgPrefix, true, true),
			"gensee: replies on served ports":     servedExprs(cgPrefix, false, true),
			"gensee: count per element, served connections answered, outside the cgroup": servedCount(nil, true),
			"gensee: served connections answered, outside the cgroup":                    servedExprs(nil, true, true),
			"gensee: replies on served ports, outside the cgroup":                        servedExprs(nil, false, true),
		}},
	} {
		t.Run(string(tc.scope), func(t *testing.T) {
			p, err := NewPlanScoped("op1", n, testCG, tc.scope)
			if err != nil {
				t.Fatal(err)
			}
			rs := build(p)
			if got := comments(rs); !slices.Equal(got, tc.comments) {
				t.Fatalf("rules:\n got %q\nwant %q", got, tc.comments)
			}
			var names []string
			for _, c := range rs.counters {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, tc.counters) {
				t.Errorf("counters = %q, want %q", names, tc.counters)
			}
			for c, want := range tc.served {
				if r := rs.rules[ruleAt(t, rs, c)]; !slices.Equal(r.canonExprs(), want) {
					t.Errorf("rule %q:\n got %q\nwant %q", c, r.canonExprs(), want)
				}
			}
			var serve, used *setElems
			for _, s := range rs.sets {
				switch s.set.Name {
				case "serve":
					serve = s
				case "serve_used":
					used = s
				}
			}
			if serve == nil || serve.set.Counter || serve.set.Concatenation || serve.set.KeyType.Bytes != 8 || serve.set.Size != 2 {
				t.Fatalf("serve set = %+v", serve)
			}
			if used == nil || used.set.Counter || !used.set.Dynamic || used.set.KeyType != serve.set.KeyType || used.set.Size != 2 || len(used.elems) != 0 || used.countsFor != serve {
				t.Fatalf("serve_used set = %+v", used)
			}
			// Sorted: tcp (6) before udp (17). proto + 3 pad, port BE + 2 pad.
			if k := serve.elems; len(k) != 2 || !bytes.Equal(k[0].Key, []byte{6, 0, 0, 0, 0x1f, 0x90, 0, 0}) || !bytes.Equal(k[1].Key, []byte{17, 0, 0, 0, 0, 53, 0, 0}) {
				t.Errorf("serve keys = %v", k)
			}
			if !slices.Equal(serve.ports, p.Serve) {
				t.Errorf("serve ports = %v, want %v", serve.ports, p.Serve)
			}
			// No rule but the count-only one and the label lacks a
			// verdict; no serve rule in cgroup scope accepts or labels
			// without the cgroup match.
			for i, r := range rs.rules {
				es := r.nft.Exprs
				_, isVerdict := es[len(es)-1].(*expr.Verdict)
				_, isLog := es[len(es)-1].(*expr.Log)
				countOnly := tc.scope == ScopeCgroup && i == len(rs.rules)-1
				if comments(rs)[i] == labelComment {
					if _, ok := es[0].(*expr.Socket); ok != (tc.scope == ScopeCgroup) {
						t.Errorf("label rule starts with %T in %s scope", es[0], tc.scope)
					}
					continue
				}
				if comments(rs)[i] == ownComment {
					// The output chain's first rule, the cgroup's in both scopes.
					if !slices.Equal(r.canonExprs(), ownLabelExprs(cgPrefix)) || comments(rs)[i-1] != labelComment {
						t.Errorf("rule %d labels the container's flows: %q", i, r.canonExprs())
					}
					continue
				}
				if strings.HasPrefix(comments(rs)[i], countPrefix) {
					continue // checkCountedPairs
				}
				if !isVerdict && !isLog && !countOnly {
					t.Errorf("rule %d (%s) ends in %T", i, comments(rs)[i], es[len(es)-1])
				}
				if tc.scope == ScopeCgroup && isVerdict {
					if _, ok := es[0].(*expr.Socket); !ok {
						t.Errorf("cgroup scope rule %d (%s) decides without the cgroup match", i, comments(rs)[i])
					}
				}
			}
			checkCountedPairs(t, rs)
			if d := diff(rs, asDumped(build(p))); len(d) > 0 {
				t.Errorf("plan does not equal itself: %v", d)
			}
		})
	}
}

// A table without serve is what it was: no serve set, counters or rules.
func TestBuildWithoutServeUnchanged(t *testing.T) {
	for _, scope := range []Scope{ScopeCgroup, ScopeNetns} {
		p, err := NewPlanScoped("op1", spec.Network{Mode: spec.NetworkDenyAll}, testCG, scope)
		if err != nil {
			t.Fatal(err)
		}
		rs := build(p)
		for _, r := range rs.rules {
			if strings.Contains(ruleName(r), "serve") {
				t.Errorf("%s: rule %q without serve", scope, ruleName(r))
			}
		}
		for _, c := range rs.counters {
			if strings.HasPrefix(c.Name, "served") {
				t.Errorf("%s: counter %s without serve", scope, c.Name)
			}
		}
		if len(rs.sets) != 1 {
			t.Errorf("%s: sets %d, want only cg", scope, len(rs.sets))
		}
	}
}

func TestDiffServeDrift(t *testing.T) {
	p := netnsPlan(t, serveNetwork(spec.NetworkDenyAll, spec.ServeRule{Proto: "tcp", Port: 8080}))
	reply := ruleAt(t, build(p), "gensee: replies on served ports")
	for _, tc := range []struct {
		name   string
		tamper func(rs *ruleset)
		want   string
	}{
		{"other port", func(rs *ruleset) {
			for _, s := range rs.sets {
				if s.set.Name == "serve" {
					s.elems[0].Key = []byte{6, 0, 0, 0, 0, 22, 0, 0}
				}
			}
		}, "set serve lacks 1 elements: 8080/tcp; set serve has 1 extra elements: 22/tcp"},
		{"no served_conn", func(rs *ruleset) {
			rs.counters = slices.DeleteFunc(rs.counters, func(c *nftables.CounterObj) bool { return c.Name == "served_conn" })
		}, "named counters are"},
		{"reply rule loses its direction", func(rs *ruleset) {
			rs.rules[reply].exprs = slices.Delete(slices.Clone(rs.rules[reply].exprs), 2, 4)
		}, fmt.Sprintf("rule %d (gensee: replies on served ports) changed", reply)},
		{"served before the non-local source check", func(rs *ruleset) {
			rs.rules[6], rs.rules[reply] = rs.rules[reply], rs.rules[6]
		}, "gensee: deny non-local source"},
		{"reverse path loosened", func(rs *ruleset) {
			i := ruleAt(t, rs, rpfComment)
			rs.rules[i].exprs = slices.Clone(rs.rules[i].exprs)
			rs.rules[i].exprs[5] = canon(&expr.Fib{Register: 1, FlagSADDR: true, ResultOIF: true, FlagPRESENT: true})
		}, "(gensee: served ports, source not routed back through its interface (reverse path)) changed"},
		{"reverse path gone", func(rs *ruleset) {
			rs.rules = slices.Delete(rs.rules, 0, 1)
		}, "(gensee: served ports, source not routed back through its interface (reverse path)) is missing"},
		{"reply rule loses its label", func(rs *ruleset) {
			rs.rules[reply].exprs = slices.Delete(slices.Clone(rs.rules[reply].exprs), 4, 7)
		}, fmt.Sprintf("rule %d (gensee: replies on served ports) changed", reply)},
		{"reply rule checks another label", func(rs *ruleset) {
			rs.rules[reply].exprs = slices.Clone(rs.rules[reply].exprs)
			rs.rules[reply].exprs[5] = canon(&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 16, Mask: make([]byte, 16), Xor: make([]byte, 16)})
		}, fmt.Sprintf("rule %d (gensee: replies on served ports) changed", reply)},
		{"label rule gone", func(rs *ruleset) {
			rs.rules = slices.Delete(rs.rules, 2, 3)
		}, "(gensee: served ports, label the flow its replies may use) is missing"},
		{"label rule sets another label", func(rs *ruleset) {
			i := ruleAt(t, rs, labelComment)
			rs.rules[i].exprs = slices.Clone(rs.rules[i].exprs)
			rs.rules[i].exprs[3] = canon(&expr.Immediate{Register: 1, Data: make([]byte, 16)})
		}, "(gensee: served ports, label the flow its replies may use) changed"},
		{"own label rule gone", func(rs *ruleset) {
			rs.rules = slices.Delete(rs.rules, 3, 4)
		}, "(gensee: label the flows the container opens) is missing"},
		{"own label rule after the drops", func(rs *ruleset) {
			i := ruleAt(t, rs, ownComment)
			r := rs.rules[i]
			rs.rules = append(slices.Delete(rs.rules, i, i+1), r)
		}, "gensee: label the flows the container opens"},
		{"own label rule on replies", func(rs *ruleset) {
			i := ruleAt(t, rs, ownComment)
			rs.rules[i].exprs = slices.Clone(rs.rules[i].exprs)
			rs.rules[i].exprs[3] = canon(&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{1}})
		}, "(gensee: label the flows the container opens) changed"},
		{"own label rule sets the serve label", func(rs *ruleset) {
			i := ruleAt(t, rs, ownComment)
			rs.rules[i].exprs = slices.Clone(rs.rules[i].exprs)
			rs.rules[i].exprs[4] = canon(&expr.Immediate{Register: 1, Data: label26})
		}, "(gensee: label the flows the container opens) changed"},
		{"input chain moved to prerouting", func(rs *ruleset) {
			c := *rs.chains[0]
			c.Hooknum = nftables.ChainHookPrerouting
			rs.chains[0] = &c
		}, "chain input is"},
		{"no served_spoofed", func(rs *ruleset) {
			rs.counters = slices.DeleteFunc(rs.counters, func(c *nftables.CounterObj) bool { return c.Name == "served_spoofed" })
		}, "named counters are"},
		{"counting rule counts the wrong set", func(rs *ruleset) {
			i := reply - 1
			rs.rules[i].exprs = slices.Clone(rs.rules[i].exprs)
			rs.rules[i].exprs[len(rs.rules[i].exprs)-1] = canon(&expr.Dynset{SrcRegKey: 1, SetName: "allow4_used", Operation: unix.NFT_DYNSET_OP_ADD, Exprs: []expr.Any{&expr.Counter{}}})
		}, fmt.Sprintf("rule %d (gensee: count per element, replies on served ports) changed", reply-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := asDumped(build(p))
			tc.tamper(got)
			d := diff(build(p), got)
			if !strings.Contains(strings.Join(d, "; "), tc.want) {
				t.Fatalf("diff = %v, want it to mention %q", d, tc.want)
			}
		})
	}
}

func TestCountersOfServe(t *testing.T) {
	p := netnsPlan(t, serveNetwork(spec.NetworkAllowExact, spec.ServeRule{Proto: "udp", Port: 53}, spec.ServeRule{Proto: "tcp", Port: 8080}))
	got := asDumped(build(p))
	got.counters = nil
	for _, name := range []string{"allowed", "denied", "denied_kernel", "spoofed", "source_routed", "allowed_outside", "denied_outside"} {
		got.counters = append(got.counters, &nftables.CounterObj{Name: name})
	}
	got.counters = append(got.counters, &nftables.CounterObj{Name: "served", Packets: 30, Bytes: 3000}, &nftables.CounterObj{Name: "served_conn", Packets: 4, Bytes: 240},
		&nftables.CounterObj{Name: "served_spoofed", Packets: 2, Bytes: 84})
	for _, s := range got.sets {
		if s.set.Name == "serve_used" {
			s.elems = []elem{
				{Key: []byte{17, 0, 0, 0, 0, 53, 0, 0}, Counter: &expr.Counter{Packets: 10, Bytes: 1000}},
				{Key: []byte{6, 0, 0, 0, 0x1f, 0x90, 0, 0}, Counter: &expr.Counter{Packets: 20, Bytes: 2000}},
			}
		}
	}
	c, err := countersOf(build(p), got)
	if err != nil {
		t.Fatal(err)
	}
	want := []ServeCount{{ServePort{ProtoTCP, 8080}, Count{20, 2000}}, {ServePort{ProtoUDP, 53}, Count{10, 1000}}}
	if c.Served != (Count{30, 3000}) || c.ServedConnections != 4 || c.ServedSpoofed != (Count{2, 84}) || !slices.Equal(c.ServeCounts, want) || len(c.Tuples) != 1 {
		t.Errorf("counters = %+v, want served 30/3000, 4 connections, serve counts %+v, one tuple", c, want)
	}
	// The per-port counts above served (reset, or written from outside):
	// withheld, served still read.
	for _, o := range got.counters {
		if o.Name == "served" {
			o.Packets = 29
		}
	}
	if c, err := countersOf(build(p), got); err != nil || c.ServeCounts != nil || c.Served != (Count{29, 3000}) || !strings.Contains(c.ElementsWithheld, "per-port counts (30 packets, 3000 bytes) exceed served") {
		t.Errorf("per-port counts above served: %+v, %v", c, err)
	}
	got.counters = slices.DeleteFunc(got.counters, func(c *nftables.CounterObj) bool { return c.Name == "served" })
	if _, err := countersOf(build(p), got); err == nil || !strings.Contains(err.Error(), `"served"`) {
		t.Errorf("missing served counter: err = %v", err)
	}
}

// The bitwise decoder accepts only a mask-and-xor, attribute by attribute.
func TestDecodeBitwise(t *testing.T) {
	data := func(extra ...netlink.Attribute) []byte {
		v := func(b byte) []byte {
			d, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_DATA_VALUE, Data: []byte{b}}})
			return d
		}
		a := []netlink.Attribute{
			{Type: unix.NFTA_BITWISE_SREG, Data: []byte{0, 0, 0, 1}},
			{Type: unix.NFTA_BITWISE_DREG, Data: []byte{0, 0, 0, 1}},
			{Type: unix.NFTA_BITWISE_LEN, Data: []byte{0, 0, 0, 1}},
			{Type: unix.NFTA_BITWISE_MASK | unix.NLA_F_NESTED, Data: v(0x12)},
			{Type: unix.NFTA_BITWISE_XOR | unix.NLA_F_NESTED, Data: v(0)},
		}
		b, _ := netlink.MarshalAttributes(append(a, extra...))
		return b
	}
	want := canon(&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}})
	if got := decodeExpr("bitwise", data()); got != want {
		t.Errorf("decode = %s, want %s", got, want)
	}
	if got := decodeExpr("bitwise", data(netlink.Attribute{Type: nftaBitwiseOp, Data: []byte{0, 0, 0, 0}})); got != want {
		t.Errorf("decode with op mask-xor = %s, want %s", got, want)
	}
	for name, extra := range map[string]netlink.Attribute{
		"left shift":     {Type: nftaBitwiseOp, Data: []byte{0, 0, 0, 1}},
		"shift amount":   {Type: 7, Data: []byte{0, 0, 0, 1}}, // NFTA_BITWISE_DATA
		"second source":  {Type: 8, Data: []byte{0, 0, 0, 2}}, // NFTA_BITWISE_SREG2
		"short operator": {Type: nftaBitwiseOp, Data: []byte{0}},
	} {
		if got := decodeExpr("bitwise", data(extra)); !strings.HasPrefix(got, "undecodable bitwise") {
			t.Errorf("%s: decode = %s, want undecodable", name, got)
		}
	}
}

// FuzzNewPlanServe: whatever network.serve says, a plan either refuses it
// or holds only tcp/udp ports in 1..65535, sorted and unique, and its
// table equals itself read back.
func FuzzNewPlanServe(f *testing.F) {
	f.Add("tcp", 8080, "udp", 53)
	f.Add("udp", 0, "tcp", 65536)
	f.Add("sctp", 1, "tcp", 1)
	f.Fuzz(func(t *testing.T, proto1 string, port1 int, proto2 string, port2 int) {
		n := serveNetwork(spec.NetworkDenyAll, spec.ServeRule{Proto: proto1, Port: port1}, spec.ServeRule{Proto: proto2, Port: port2})
		for _, scope := range []Scope{ScopeCgroup, ScopeNetns} {
			p, err := NewPlanScoped("fuzz", n, testCG, scope)
			if err != nil {
				return
			}
			if len(p.Serve) == 0 || len(p.Serve) > 2 {
				t.Fatalf("Serve = %v from %v", p.Serve, n.Serve)
			}
			for i, s := range p.Serve {
				if (s.Proto != ProtoTCP && s.Proto != ProtoUDP) || s.Port == 0 {
					t.Fatalf("bad port %+v", s)
				}
				if i > 0 && (p.Serve[i-1].Proto > s.Proto || (p.Serve[i-1].Proto == s.Proto && p.Serve[i-1].Port >= s.Port)) {
					t.Fatalf("Serve not sorted and unique: %v", p.Serve)
				}
			}
			if d := diff(build(p), asDumped(build(p))); len(d) > 0 {
				t.Fatalf("plan does not equal itself: %v", d)
			}
		}
	})
}

// decodeFib reads what the kernel echoes for `fib saddr type` and refuses
// what v0.3.0's decoder would silently drop.
func TestDecodeFib(t *testing.T) {
	attrs := func(a ...netlink.Attribute) []byte {
		b, err := netlink.MarshalAttributes(a)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	dreg := netlink.Attribute{Type: unix.NFTA_FIB_DREG, Data: u32(1)}
	result := netlink.Attribute{Type: unix.NFTA_FIB_RESULT, Data: u32(unix.NFT_FIB_RESULT_ADDRTYPE)}
	flags := netlink.Attribute{Type: unix.NFTA_FIB_FLAGS, Data: u32(unix.NFTA_FIB_F_SADDR)}
	if got, want := decodeExpr("fib", attrs(dreg, result, flags)), canon(notLocalSource()[0]); got != want {
		t.Fatalf("fib saddr type = %s, want %s", got, want)
	}
	for name, data := range map[string][]byte{
		"unknown result": attrs(dreg, netlink.Attribute{Type: unix.NFTA_FIB_RESULT, Data: u32(4)}, flags),
		"unknown flag":   attrs(dreg, result, netlink.Attribute{Type: unix.NFTA_FIB_FLAGS, Data: u32(unix.NFTA_FIB_F_SADDR | 0x40)}),
		"extra attr":     attrs(dreg, result, flags, netlink.Attribute{Type: 9, Data: u32(0)}),
		"short":          attrs(dreg, netlink.Attribute{Type: unix.NFTA_FIB_RESULT, Data: []byte{3}}),
	} {
		if got := decodeExpr("fib", data); !strings.HasPrefix(got, "undecodable fib") {
			t.Errorf("%s: decoded as %s, want undecodable", name, got)
		}
	}
}

// decodeCt tells a ct write (`ct label set`) from a load, which v0.3.0's
// decoder reads alike (it ignores NFTA_CT_SREG), and refuses the rest.
func TestDecodeCt(t *testing.T) {
	attrs := func(a ...netlink.Attribute) []byte {
		b, err := netlink.MarshalAttributes(a)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	key := netlink.Attribute{Type: unix.NFTA_CT_KEY, Data: u32(unix.NFT_CT_LABELS)}
	dreg := netlink.Attribute{Type: unix.NFTA_CT_DREG, Data: u32(1)}
	sreg := netlink.Attribute{Type: unix.NFTA_CT_SREG, Data: u32(1)}
	load, set := servedFlow()[0], labelServedFlow(t)
	if got, want := decodeExpr("ct", attrs(key, dreg)), canon(load); got != want {
		t.Errorf("ct load label = %s, want %s", got, want)
	}
	if got, want := decodeExpr("ct", attrs(key, sreg)), canon(set); got != want {
		t.Errorf("ct set label = %s, want %s", got, want)
	}
	if canon(load) == canon(set) {
		t.Errorf("load and set render alike: %s", canon(load))
	}
	for name, data := range map[string][]byte{
		"both registers": attrs(key, dreg, sreg),
		"no register":    attrs(key),
		"direction":      attrs(key, dreg, netlink.Attribute{Type: unix.NFTA_CT_DIRECTION, Data: []byte{1}}),
		"short key":      attrs(netlink.Attribute{Type: unix.NFTA_CT_KEY, Data: []byte{13}}, dreg),
	} {
		if got := decodeExpr("ct", data); !strings.HasPrefix(got, "undecodable ct") {
			t.Errorf("%s: decoded as %s, want undecodable", name, got)
		}
	}
}

// labelServedFlow is the label rule's last expression, the ct write.
func labelServedFlow(t *testing.T) expr.Any {
	t.Helper()
	p := netnsPlan(t, serveNetwork(spec.NetworkDenyAll, spec.ServeRule{Proto: "udp", Port: 53}))
	rs := build(p)
	es := rs.rules[ruleAt(t, rs, labelComment)].nft.Exprs
	return es[len(es)-1]
}
