package netpolicy

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

func comments(rs *ruleset) []string {
	var c []string
	for _, r := range rs.rules {
		c = append(c, ruleName(r))
	}
	return c
}

// countPrefix starts the comment of every rule that counts per element.
const countPrefix = "gensee: count per element, "

// checkCounting: a counting rule ends in an add of the key to the used set
// of the set it looked up last, and neither counts in a named counter nor
// decides; the rule after it is the one it counts for, the same match.
func checkCounting(t *testing.T, r *rule) {
	t.Helper()
	es := r.nft.Exprs
	d, ok := es[len(es)-1].(*expr.Dynset)
	if !ok || d.Operation != unix.NFT_DYNSET_OP_ADD || d.SrcRegKey != 1 || d.Timeout != 0 || d.Invert ||
		len(d.Exprs) != 1 || canon(d.Exprs[0]) != canon(&expr.Counter{}) {
		t.Errorf("counting rule %q does not end in an add with a counter: %q", ruleName(r), r.canonExprs())
		return
	}
	var lookups []string
	last := -1
	for i, e := range es {
		switch v := e.(type) {
		case *expr.Objref, *expr.Verdict:
			t.Errorf("counting rule %q counts in a named counter or decides: %q", ruleName(r), r.canonExprs())
		case *expr.Lookup:
			lookups, last = append(lookups, v.SetName), i
		}
	}
	if len(lookups) == 0 || d.SetName != lookups[len(lookups)-1]+usedSuffix {
		t.Errorf("counting rule %q adds to %s after looking up %v", ruleName(r), d.SetName, lookups)
		return
	}
	// The key added is the key looked up: the loads between the lookup
	// and the add are the ones just before the lookup.
	reload := r.canonExprs()[last+1 : len(es)-1]
	if n := len(reload); n == 0 || last < n || !slices.Equal(reload, r.canonExprs()[last-n:last]) {
		t.Errorf("counting rule %q adds another key than it looked up: %q", ruleName(r), r.canonExprs())
	}
}

// checkCountedPairs: each counting rule is followed by the rule it counts
// for, whose expressions are the counting rule's up to its lookup.
func checkCountedPairs(t *testing.T, rs *ruleset) {
	t.Helper()
	names := comments(rs)
	for i, r := range rs.rules {
		if !strings.HasPrefix(names[i], countPrefix) {
			continue
		}
		checkCounting(t, r)
		if i+1 == len(rs.rules) || names[i+1] != "gensee: "+strings.TrimPrefix(names[i], countPrefix) {
			t.Errorf("counting rule %q is not followed by the rule it counts for", names[i])
			continue
		}
		l := slices.IndexFunc(r.nft.Exprs, func(e expr.Any) bool {
			lu, ok := e.(*expr.Lookup)
			return ok && lu.SetName != "cg"
		})
		next := rs.rules[i+1].canonExprs()
		if l < 0 || len(next) < l+1 || !slices.Equal(r.canonExprs()[:l+1], next[:l+1]) {
			t.Errorf("counting rule %q matches other packets than %q:\n %q\n %q", names[i], names[i+1], r.canonExprs(), next)
		}
	}
}

// ruleAt is the index of the rule with comment c.
func ruleAt(t *testing.T, rs *ruleset, c string) int {
	t.Helper()
	i := slices.Index(comments(rs), c)
	if i < 0 {
		t.Fatalf("no rule %q", c)
	}
	return i
}

func canonAll(es ...expr.Any) []string {
	var out []string
	for _, e := range es {
		out = append(out, canon(e))
	}
	return out
}

func TestBuildDenyAll(t *testing.T) {
	p, err := NewPlan("op-deny", spec.Network{Mode: spec.NetworkDenyAll}, testCG)
	if err != nil {
		t.Fatal(err)
	}
	rs := build(p)
	if rs.table.Name != "gensee_op-deny" || rs.table.Family != nftables.TableFamilyINet {
		t.Fatalf("table = %+v", rs.table)
	}
	ch := rs.chains[0]
	if len(rs.chains) != 1 || ch.Name != "output" || ch.Type != nftables.ChainTypeFilter || *ch.Hooknum != unix.NF_INET_LOCAL_OUT ||
		*ch.Priority != 0 || *ch.Policy != nftables.ChainPolicyAccept {
		t.Fatalf("chain = %s", chainString(ch))
	}
	if len(rs.sets) != 1 || rs.sets[0].set.Name != "cg" || rs.sets[0].set.KeyType != nftables.TypeCGroupV2 ||
		!bytes.Equal(rs.sets[0].elems[0].Key, binary.NativeEndian.AppendUint64(nil, 4242)) {
		t.Fatalf("sets = %+v", rs.sets[0])
	}
	cg := []expr.Any{
		&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 2, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: "cg"},
	}
	// `meta skuid >= 0`, as nft(8) compiles it.
	owned := []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
	// `fib saddr type != local`, as nft(8) compiles it.
	notLocal := []expr.Any{
		&expr.Fib{Register: 1, FlagSADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)},
	}
	logDeny := []expr.Any{
		&expr.Limit{Type: expr.LimitTypePkts, Rate: 20, Unit: expr.LimitTimeSecond, Burst: 40},
		&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX, Group: 2604, Data: []byte("gensee deny op-deny ")},
	}
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	want := [][]string{
		ownLabelExprs(cg),
		canonAll(slices.Concat(cg, notLocal, owned, logDeny)...),
		canonAll(slices.Concat(cg, notLocal, owned, []expr.Any{&expr.Objref{Type: 1, Name: "spoofed"}, &expr.Objref{Type: 1, Name: "denied"}, drop})...),
		canonAll(slices.Concat(cg, notLocal, []expr.Any{&expr.Objref{Type: 1, Name: "spoofed"}, &expr.Objref{Type: 1, Name: "denied_kernel"}, drop})...),
	}
	want = append(want, srcRouteWant(cg, owned)...)
	want = append(want, [][]string{
		canonAll(slices.Concat(cg, owned, []expr.Any{
			&expr.Limit{Type: expr.LimitTypePkts, Rate: 20, Unit: expr.LimitTimeSecond, Burst: 40},
			&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX, Group: 2604, Data: []byte("gensee deny op-deny ")},
		})...),
		canonAll(slices.Concat(cg, owned, []expr.Any{
			&expr.Objref{Type: 1, Name: "denied"},
			&expr.Verdict{Kind: expr.VerdictDrop},
		})...),
		canonAll(slices.Concat(cg, []expr.Any{
			&expr.Objref{Type: 1, Name: "denied_kernel"},
			&expr.Verdict{Kind: expr.VerdictDrop},
		})...),
	}...)
	if len(rs.rules) != len(want) {
		t.Fatalf("rules %q", comments(rs))
	}
	for i, w := range want {
		if !slices.Equal(rs.rules[i].canonExprs(), w) {
			t.Errorf("rule %d:\n got %q\nwant %q", i, rs.rules[i].canonExprs(), w)
		}
	}
}

func TestBuildAllowExact(t *testing.T) {
	p := exactPlan(t)
	rs := build(p)
	wantComments := []string{
		ownComment,
		"gensee: icmpv6 duplicate address detection (source ::)",
		"gensee: log non-local source", "gensee: deny non-local source", "gensee: deny non-local source, no owning process",
		"gensee: deny ipv4 loose source route", "gensee: deny ipv4 loose source route, no owning process", "gensee: deny ipv4 strict source route", "gensee: deny ipv4 strict source route, no owning process", "gensee: deny ipv6 routing header", "gensee: deny ipv6 routing header, no owning process",
		"gensee: loopback allowed by contract",
		"gensee: count per element, allowed ipv4 tuples", "gensee: allowed ipv4 tuples", "gensee: count per element, replies from allowed ipv4 tuples", "gensee: replies from allowed ipv4 tuples",
		"gensee: count per element, allowed ipv6 tuples", "gensee: allowed ipv6 tuples", "gensee: count per element, replies from allowed ipv6 tuples", "gensee: replies from allowed ipv6 tuples",
		"gensee: count per element, allowed icmp destinations", "gensee: allowed icmp destinations", "gensee: count per element, allowed icmpv6 destinations", "gensee: allowed icmpv6 destinations",
		"gensee: icmpv6 neighbor discovery for allowed ipv6",
		"gensee: log denied", "gensee: deny", "gensee: deny, no owning process",
	}
	if got := comments(rs); !slices.Equal(got, wantComments) {
		t.Fatalf("rules:\n got %q\nwant %q", got, wantComments)
	}
	checkCountedPairs(t, rs)

	// The v4 tuple rules are what nft(8) 1.0.6 emits for
	// `socket cgroupv2 level 2 @cg ip daddr . meta l4proto . th dport @allow4 add @allow4_used { ip daddr . meta l4proto . th dport counter }`
	// and `socket cgroupv2 level 2 @cg ip daddr . meta l4proto . th dport @allow4 counter name "allowed" accept`.
	match := []expr.Any{
		&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 2, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: "cg"},
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 9},
		&expr.Payload{DestRegister: 10, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: "allow4"},
	}
	want := canonAll(append(slices.Clone(match),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 9},
		&expr.Payload{DestRegister: 10, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Dynset{SrcRegKey: 1, SetName: "allow4_used", Operation: unix.NFT_DYNSET_OP_ADD, Exprs: []expr.Any{&expr.Counter{}}})...)
	if r := rs.rules[ruleAt(t, rs, "gensee: count per element, allowed ipv4 tuples")]; !slices.Equal(r.canonExprs(), want) {
		t.Errorf("ipv4 tuple counting rule:\n got %q\nwant %q", r.canonExprs(), want)
	}
	want = canonAll(append(slices.Clone(match),
		&expr.Objref{Type: 1, Name: "allowed"},
		&expr.Verdict{Kind: expr.VerdictAccept})...)
	if r := rs.rules[ruleAt(t, rs, "gensee: allowed ipv4 tuples")]; !slices.Equal(r.canonExprs(), want) {
		t.Errorf("ipv4 tuple rule:\n got %q\nwant %q", r.canonExprs(), want)
	}
	// Duplicate address detection: `meta nfproto ipv6 ip6 saddr :: meta
	// l4proto ipv6-icmp icmpv6 type nd-neighbor-solicit`, nothing wider.
	want = canonAll(
		&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 2, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: "cg"},
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 16},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: make([]byte, 16)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{58}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{135}},
		&expr.Objref{Type: 1, Name: "allowed"},
		&expr.Verdict{Kind: expr.VerdictAccept},
	)
	if !slices.Equal(rs.rules[1].canonExprs(), want) {
		t.Errorf("duplicate address detection rule:\n got %q\nwant %q", rs.rules[1].canonExprs(), want)
	}
	// IPv6: daddr at nh+24 into reg 1, l4proto into reg 2, dport into reg 13.
	v6i := ruleAt(t, rs, "gensee: allowed ipv6 tuples")
	v6 := rs.rules[v6i].nft.Exprs
	if pl := v6[4].(*expr.Payload); pl.Offset != 24 || pl.Len != 16 || pl.DestRegister != 1 ||
		v6[5].(*expr.Meta).Register != 2 || v6[6].(*expr.Payload).DestRegister != 13 {
		t.Errorf("ipv6 tuple rule registers: %q", rs.rules[v6i].canonExprs())
	}
	// Replies: ct direction reply, then the source side of the tuple.
	rpi := ruleAt(t, rs, "gensee: replies from allowed ipv4 tuples")
	rp := rs.rules[rpi].nft.Exprs
	if ct := rp[2].(*expr.Ct); ct.Key != expr.CtKeyDIRECTION || !bytes.Equal(rp[3].(*expr.Cmp).Data, []byte{1}) ||
		rp[6].(*expr.Payload).Offset != 12 || rp[8].(*expr.Payload).Offset != 0 {
		t.Errorf("reply rule: %q", rs.rules[rpi].canonExprs())
	}

	sets := map[string]*setElems{}
	ids := map[uint32]bool{}
	for _, s := range rs.sets {
		sets[s.set.Name] = s
		if s.set.ID == 0 || ids[s.set.ID] || s.set.Table != rs.table {
			t.Errorf("set %s: id %d reused or zero, or wrong table", s.set.Name, s.set.ID)
		}
		ids[s.set.ID] = true
	}
	if k := sets["allow4"].elems; len(k) != 2 ||
		!bytes.Equal(k[0].Key, []byte{192, 0, 2, 10, 6, 0, 0, 0, 1, 187, 0, 0}) ||
		!bytes.Equal(k[1].Key, []byte{192, 0, 2, 11, 17, 0, 0, 0, 0, 53, 0, 0}) {
		t.Errorf("allow4 keys = %v", k)
	}
	if k := sets["allow6"].elems; len(k) != 1 || len(k[0].Key) != 24 || k[0].Key[16] != 6 || k[0].Key[20] != 1 || k[0].Key[21] != 187 {
		t.Errorf("allow6 keys = %v", k)
	}
	if s := sets["allow4"].set; s.Concatenation || s.Counter || s.KeyType.Bytes != 12 {
		t.Errorf("allow4 = %+v", s)
	}
	if s := sets["allow6"].set; s.Concatenation || s.Counter || s.KeyType.Bytes != 24 {
		t.Errorf("allow6 = %+v", s)
	}
	if k := sets["icmp4"].elems; len(k) != 1 || !bytes.Equal(k[0].Key, []byte{192, 0, 2, 12}) || sets["icmp4"].set.Counter {
		t.Errorf("icmp4 = %v", k)
	}
	// Each counted set has its used set: same key, as large, dynamic,
	// empty, no expressions of its own (the add gives the counter).
	for _, name := range []string{"allow4", "allow6", "icmp4", "icmp6"} {
		in, u := sets[name], sets[name+"_used"]
		if u == nil || u.countsFor != in || !u.set.Dynamic || u.set.Counter || len(u.exprs) != 0 ||
			u.set.KeyType != in.set.KeyType || u.set.KeyByteOrder != in.set.KeyByteOrder || u.set.Size != in.set.Size || len(u.elems) != 0 {
			t.Errorf("%s_used = %+v", name, u)
		}
	}
	if sets["nd6_used"] != nil || sets["cg_used"] != nil {
		t.Error("a set nothing counts has a used set")
	}
	if k := sets["nd6"].elems; len(k) != 3 {
		t.Errorf("nd6 = %v", k)
	}
	if got := len(sets["allow4"].tuples) + len(sets["allow6"].tuples) + len(sets["icmp4"].tuples) + len(sets["icmp6"].tuples); got != len(p.Allow) {
		t.Errorf("sets carry %d tuples, plan has %d", got, len(p.Allow))
	}

	// Invariants of every rule (docs/design.md §8: positive matches and an
	// explicit drop; never `!=` but on the address type, in the rules
	// that drop non-local sources; the limit never gates the drop).
	spoof := func(i int) bool { return strings.Contains(comments(rs)[i], "non-local source") }
	for i, r := range rs.rules {
		es := r.nft.Exprs
		if spoof(i) != (i >= 2 && i <= 4) {
			t.Errorf("rule %d (%s): the non-local source rules are 2..4, right after duplicate address detection and before every other accept", i, comments(rs)[i])
		}
		if s, ok := es[0].(*expr.Socket); !ok || s.Key != expr.SocketKeyCgroupv2 || s.Level != p.Cgroup.Level {
			t.Errorf("rule %d does not start with the cgroup match: %q", i, r.canonExprs())
		}
		if l, ok := es[1].(*expr.Lookup); !ok || l.SetName != "cg" || l.SetID != sets["cg"].set.ID {
			t.Errorf("rule %d: second expression is not the @cg lookup", i)
		}
		for _, e := range es {
			switch v := e.(type) {
			case *expr.Cmp:
				// Only equality, the `meta skuid >= 0` tautology, and
				// `fib saddr type != local` in the non-local source rules.
				fibNeq := spoof(i) && v.Op == expr.CmpOpNeq && slices.Equal(r.canonExprs()[2:4], canonAll(notLocalSource()...))
				if v.Op != expr.CmpOpEq && (v.Op != expr.CmpOpGte || !bytes.Equal(v.Data, []byte{0, 0, 0, 0})) && !fibNeq {
					t.Errorf("rule %d uses a negative or range comparison: %q", i, r.canonExprs())
				}
			case *expr.Lookup:
				if v.Invert {
					t.Errorf("rule %d uses an inverted lookup", i)
				}
				if s := sets[v.SetName]; s == nil || s.set.ID != v.SetID {
					t.Errorf("rule %d looks up unknown set %s/%d", i, v.SetName, v.SetID)
				}
			case *expr.Limit:
				if c := comments(rs)[i]; c != "gensee: log denied" && c != "gensee: log non-local source" {
					t.Errorf("rule %d is rate-limited", i)
				}
			}
		}
		last := es[len(es)-1]
		if strings.HasPrefix(comments(rs)[i], countPrefix) {
			checkCounting(t, r)
			continue
		}
		switch comments(rs)[i] {
		case ownComment:
			if i != 0 || !slices.Equal(r.canonExprs(), ownLabelExprs(es[:2])) {
				t.Errorf("rule %d labels the flows the container opens: %q", i, r.canonExprs())
			}
		case "gensee: deny non-local source", "gensee: deny non-local source, no owning process":
			want := []string{canon(&expr.Objref{Type: 1, Name: "spoofed"}), canon(&expr.Objref{Type: 1, Name: "denied"}), canon(&expr.Verdict{Kind: expr.VerdictDrop})}
			if strings.HasSuffix(comments(rs)[i], "process") {
				want[1] = canon(&expr.Objref{Type: 1, Name: "denied_kernel"})
			}
			if !slices.Equal(r.canonExprs()[len(es)-3:], want) {
				t.Errorf("rule %d (%s) does not count spoofed and drop: %q", i, comments(rs)[i], r.canonExprs())
			}
		case srcRouteComments("")[0], srcRouteComments("")[1], srcRouteComments("")[2], srcRouteComments("")[3], srcRouteComments("")[4], srcRouteComments("")[5]:
			// TestBuildSourceRouted
		case "gensee: log denied", "gensee: log non-local source":
			if _, ok := last.(*expr.Log); !ok {
				t.Errorf("log rule ends in %T", last)
			}
		case "gensee: deny":
			if v, ok := last.(*expr.Verdict); !ok || v.Kind != expr.VerdictDrop {
				t.Errorf("deny rule does not end in drop")
			}
		case "gensee: deny, no owning process":
			if v, ok := last.(*expr.Verdict); !ok || v.Kind != expr.VerdictDrop || i != len(rs.rules)-1 || len(es) != 4 {
				t.Errorf("the last rule is not cgroup → drop: %q", r.canonExprs())
			}
		default:
			if v, ok := last.(*expr.Verdict); !ok || v.Kind != expr.VerdictAccept {
				t.Errorf("rule %d does not end in accept", i)
			}
			if o, ok := es[len(es)-2].(*expr.Objref); !ok || o.Name != "allowed" {
				t.Errorf("rule %d accepts without counting", i)
			}
		}
	}
}

func TestBatchFitsAttributes(t *testing.T) {
	// One NEWSETELEM's element list must fit a u16 attribute length:
	// per IPv6 element 4 (list entry) + 4 (key) + 4 (data) + 24 (key).
	if n := maxElemsPerMsg * (4 + 4 + 4 + 24); n > 65535-64 {
		t.Fatalf("maxElemsPerMsg %d makes a %d-byte attribute", maxElemsPerMsg, n)
	}
}

// ownComment is the output chain's first rule: the flows the container
// opens get conntrack label 27.
const ownComment = "gensee: label the flows the container opens"

// label27 is conntrack label bit 27 as nft(8) 1.0.6 compiles `ct label
// set 27` on a little-endian host (the kernel's bitmap of unsigned longs).
var label27 = []byte{0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// ownLabelExprs is what nft(8) 1.0.6 emits for `ct direction original ct
// label set 27`, after prefix (the cgroup match).
func ownLabelExprs(prefix []expr.Any) []string {
	return canonAll(append(slices.Clone(prefix),
		&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}},
		&expr.Immediate{Register: 1, Data: label27},
		&expr.Ct{Register: 1, SourceRegister: true, Key: expr.CtKeyLABELS})...)
}
