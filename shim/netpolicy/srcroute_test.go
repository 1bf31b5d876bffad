package netpolicy

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

var (
	testCgPrefix = []expr.Any{
		&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: 2, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: "cg"},
	}
	// `meta skuid >= 0`, as nft(8) compiles it.
	ownedExprs = []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
)

// srcRouteMatches is what nft(8) 1.0.6 emits in an inet table for `ip
// option lsrr exists`, `ip option ssrr exists` and `exthdr rt exists`.
func srcRouteMatches() [][]expr.Any {
	m := func(nfp byte, op expr.ExthdrOp, ty uint8) []expr.Any {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfp}},
			&expr.Exthdr{Op: op, Type: ty, Len: 1, Flags: unix.NFT_EXTHDR_F_PRESENT, DestRegister: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{1}},
		}
	}
	return [][]expr.Any{m(unix.NFPROTO_IPV4, 2, 131), m(unix.NFPROTO_IPV4, 2, 137), m(unix.NFPROTO_IPV6, 0, 43)}
}

var srcRouteNames = []string{"ipv4 loose source route", "ipv4 strict source route", "ipv6 routing header"}

// srcRouteComments are the source-route rules' comments: the cgroup's
// (owned, then kernel) or, with note, the outside ones.
func srcRouteComments(note string) []string {
	var out []string
	for _, n := range srcRouteNames {
		if note != "" {
			out = append(out, "gensee: deny "+n+note)
			continue
		}
		out = append(out, "gensee: deny "+n, "gensee: deny "+n+", no owning process")
	}
	return out
}

// srcRouteWant are the rules srcRouteComments names: with cg, the cgroup's
// pair per match; without, the outside rule.
func srcRouteWant(cg, owned []expr.Any) [][]string {
	var out [][]string
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	for _, m := range srcRouteMatches() {
		if cg == nil {
			out = append(out, canonAll(slices.Concat(m, []expr.Any{&expr.Objref{Type: 1, Name: "source_routed"}, &expr.Objref{Type: 1, Name: "denied_outside"}, drop})...))
			continue
		}
		out = append(out,
			canonAll(slices.Concat(cg, m, owned, []expr.Any{&expr.Objref{Type: 1, Name: "source_routed"}, &expr.Objref{Type: 1, Name: "denied"}, drop})...),
			canonAll(slices.Concat(cg, m, []expr.Any{&expr.Objref{Type: 1, Name: "source_routed"}, &expr.Objref{Type: 1, Name: "denied_kernel"}, drop})...))
	}
	return out
}

// Source-routed packets are dropped before every accept, in both scopes,
// and every part of the match is read back.
func TestBuildSourceRouted(t *testing.T) {
	for _, scope := range []Scope{ScopeCgroup, ScopeNetns} {
		p, err := NewPlanScoped("op1", exactNetwork(), testCG, scope)
		if err != nil {
			t.Fatal(err)
		}
		rs := build(p)
		names := comments(rs)
		first := slices.IndexFunc(names, func(s string) bool { return s == "gensee: deny ipv4 loose source route" })
		accept := slices.IndexFunc(names, func(s string) bool { return s == "gensee: loopback allowed by contract" })
		if first < 0 || accept < first || !slices.Equal(names[first:first+6], srcRouteComments("")) {
			t.Fatalf("%s: rules %q", scope, names)
		}
		if scope == ScopeNetns {
			o := slices.IndexFunc(names, func(s string) bool { return s == "gensee: deny ipv4 loose source route"+outsideNote })
			oa := slices.IndexFunc(names, func(s string) bool { return s == "gensee: loopback allowed by contract"+outsideNote })
			if o < 0 || oa < o || !slices.Equal(names[o:o+3], srcRouteComments(outsideNote)) {
				t.Fatalf("netns: outside rules %q", names)
			}
			for i, w := range srcRouteWant(nil, nil) {
				if got := rs.rules[o+i].canonExprs(); !slices.Equal(got, w) {
					t.Errorf("outside rule %d:\n got %q\nwant %q", i, got, w)
				}
			}
		}
		for i, w := range srcRouteWant(testCgPrefix, ownedExprs) {
			if got := rs.rules[first+i].canonExprs(); !slices.Equal(got, w) {
				t.Errorf("%s: rule %d:\n got %q\nwant %q", scope, first+i, got, w)
			}
		}
	}
}

// decodeExthdr refuses a write and keeps what it decodes.
func TestDecodeExthdr(t *testing.T) {
	load := []netlink.Attribute{
		{Type: unix.NFTA_EXTHDR_DREG, Data: u32(1)},
		{Type: unix.NFTA_EXTHDR_TYPE, Data: []byte{131}},
		{Type: unix.NFTA_EXTHDR_OFFSET, Data: u32(0)},
		{Type: unix.NFTA_EXTHDR_LEN, Data: u32(1)},
		{Type: unix.NFTA_EXTHDR_OP, Data: u32(2)},
		{Type: unix.NFTA_EXTHDR_FLAGS, Data: u32(unix.NFT_EXTHDR_F_PRESENT)},
	}
	want := canon(&expr.Exthdr{Op: 2, Type: 131, Len: 1, Flags: unix.NFT_EXTHDR_F_PRESENT, DestRegister: 1})
	if got := decodeExpr("exthdr", attrBytes(t, load...)); got != want {
		t.Fatalf("decoded %s, want %s", got, want)
	}
	for _, tc := range []struct {
		name string
		as   []netlink.Attribute
	}{
		{"write", append(slices.Clone(load), netlink.Attribute{Type: unix.NFTA_EXTHDR_SREG, Data: u32(1)})},
		{"wide type", append(slices.Clone(load[:1]), netlink.Attribute{Type: unix.NFTA_EXTHDR_TYPE, Data: u32(131)})},
		{"unknown attribute", append(slices.Clone(load), netlink.Attribute{Type: 99, Data: u32(0)})},
	} {
		if got := decodeExpr("exthdr", attrBytes(t, tc.as...)); !strings.HasPrefix(got, "undecodable exthdr") {
			t.Errorf("%s: decoded %s, want undecodable", tc.name, got)
		}
	}
	for _, tc := range []struct {
		name string
		i    int
		a    netlink.Attribute
	}{
		{"tcp option", 4, netlink.Attribute{Type: unix.NFTA_EXTHDR_OP, Data: u32(1)}},
		{"value, not presence", 5, netlink.Attribute{Type: unix.NFTA_EXTHDR_FLAGS, Data: u32(0)}},
		{"record route", 1, netlink.Attribute{Type: unix.NFTA_EXTHDR_TYPE, Data: []byte{7}}},
	} {
		as := slices.Clone(load)
		as[tc.i] = tc.a
		if got := decodeExpr("exthdr", attrBytes(t, as...)); got == want {
			t.Errorf("%s reads as the plan", tc.name)
		}
	}
}
