package netpolicy

import (
	"encoding/binary"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// Names of the objects inside a gensee table. Part of the operator-facing
// interface (`nft list table inet gensee_...`): extend, don't rename.
const (
	chainName = "output"
	// chainInput holds the reverse-path check of served ports; only with
	// served ports.
	chainInput   = "input"
	counterAllow = "allowed"
	counterDeny  = "denied"
	counterDenyK = "denied_kernel"
	// Packets dropped because their source is not an address of the
	// namespace; each is counted in denied, denied_kernel or
	// denied_outside as well.
	counterSpoofed = "spoofed"
	// Packets dropped because they carry a source route (IPv4 LSRR or
	// SSRR option, IPv6 routing header); each is counted in denied,
	// denied_kernel or denied_outside as well.
	counterSourceRouted = "source_routed"
	// Netns scope only: packets no cgroup rule decided.
	counterAllowO = "allowed_outside"
	counterDenyO  = "denied_outside"
	// With served ports only: replies of served connections, and the
	// SYN-ACKs among them.
	counterServed     = "served"
	counterServedConn = "served_conn"
	// With served ports only: inbound packets to a served port dropped
	// because their source does not route back where they came from.
	counterServedSpoofed = "served_spoofed"
	setCgroup            = "cg"
	setAllow4            = "allow4" // ipv4_addr . inet_proto . inet_service
	setAllow6            = "allow6" // ipv6_addr . inet_proto . inet_service
	setICMP4             = "icmp4"  // ipv4_addr
	setICMP6             = "icmp6"  // ipv6_addr
	setND6               = "nd6"    // icmpv6_type
	setServe             = "serve"  // inet_proto . inet_service
	// usedSuffix names the companion of each counted set (allow4_used,
	// ..., serve_used): a dynamic set, empty at install, into which the
	// rules that match the counted set add the key they matched, each new
	// element with a counter of its own. Its elements are the tuples (or
	// ports) used, with their counts.
	usedSuffix = "_used"
)

// ICMPv6 neighbor discovery types accepted when IPv6 destinations are allowed.
var ndTypes = []byte{133, ndNeighborSolicit, 136} // router solicit, neighbor solicit, neighbor advert

// ndNeighborSolicit is the one ICMPv6 type accepted from :: (duplicate
// address detection).
const ndNeighborSolicit = 135

// Key types of the allow sets. Concatenated fields are padded to 4 bytes.
var (
	keyAllow4 = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	keyAllow6 = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetProto, nftables.TypeInetService)
	keyServe  = nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)
)

// ruleset is one gensee table as nftables objects: what build makes from a
// plan and what dump reads back from the kernel, so the two compare directly.
type ruleset struct {
	table    *nftables.Table
	counters []*nftables.CounterObj
	sets     []*setElems
	chains   []*nftables.Chain
	rules    []*rule
	// gen is the namespace's generation a dump read, when genOK: the
	// same before and after it (no commit moved it while it read; what
	// that proves, gen.go says).
	gen   uint32
	genOK bool
}

// rule is one rule in canonical form, comparable between plan and dump.
type rule struct {
	chain    string
	handle   uint64 // dumped rules only
	userData []byte
	exprs    []string       // canonical renderings (canon); a built rule's on first use: canonExprs
	nft      *nftables.Rule // built rules only: what install sends
}

// elem is one set element as this package plans and reads it: a key and,
// in a used set, the counter the rules' add gave it. Anything else a dumped
// element carries (data, a key end, an interval end, a timeout, another
// expression) is told in setElems.odd. Smaller than nftables.SetElement,
// and two pointers: a 10,000-tuple read-back holds two slices of them.
type elem struct {
	Key     []byte
	Counter *expr.Counter
}

type setElems struct {
	set   *nftables.Set
	elems []elem
	// tuples[i] is the plan tuple elems[i] encodes (allow and icmp sets).
	tuples []Tuple
	// ports[i] is the served port elems[i] encodes (the serve set).
	ports []ServePort
	// index maps a key to its position in elems; see indexKeys.
	index map[string]int32
	// exprs names the expressions the set's declaration gives each
	// element (none for every gensee set: a used set's counters come from
	// the add, whose counter a dump shows only when the set has none).
	exprs []string
	// countsFor is, for a used set, the set whose matches it counts: its
	// elements are keys of countsFor, added by the rules, never planned.
	countsFor *setElems
	// odd (dumped sets) maps an element's index to what else it carries
	// (dumpElems).
	odd map[int]string
}

// counted reports whether the set's element counters are read (the used
// sets): the counters dump and countersOf agree on it.
func (s *setElems) counted() bool { return s.countsFor != nil }

// indexKeys builds the key index read-back compares against. Keys are
// substrings of one string: no allocation per key.
func (s *setElems) indexKeys() map[string]int32 {
	if s.index != nil {
		return s.index
	}
	n := 0
	for _, e := range s.elems {
		n += len(e.Key)
	}
	buf := make([]byte, 0, n)
	for _, e := range s.elems {
		buf = append(buf, e.Key...)
	}
	all := string(buf)
	s.index = make(map[string]int32, len(s.elems))
	off := 0
	for i, e := range s.elems {
		s.index[all[off:off+len(e.Key)]] = int32(i)
		off += len(e.Key)
	}
	return s.index
}

// prepare builds what read-back needs from the planned side, the sets'
// key index and the rules' renderings (about 0.15 ms of reflection for a
// deny_all table); Apply runs it while the kernel installs the batch.
func (rs *ruleset) prepare() {
	for _, s := range rs.sets {
		s.indexKeys()
	}
	for _, r := range rs.rules {
		r.canonExprs()
	}
}

// build translates a plan into the table's objects. Pure: no kernel access.
func build(p *Plan) *ruleset {
	netns := p.Scope == ScopeNetns
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: p.Table}
	rs := &ruleset{table: t}
	rs.counters = []*nftables.CounterObj{{Table: t, Name: counterAllow}, {Table: t, Name: counterDeny}, {Table: t, Name: counterDenyK}, {Table: t, Name: counterSpoofed}, {Table: t, Name: counterSourceRouted}}
	if netns {
		rs.counters = append(rs.counters, &nftables.CounterObj{Table: t, Name: counterAllowO}, &nftables.CounterObj{Table: t, Name: counterDenyO})
	}
	if len(p.Serve) > 0 {
		rs.counters = append(rs.counters, &nftables.CounterObj{Table: t, Name: counterServed}, &nftables.CounterObj{Table: t, Name: counterServedConn},
			&nftables.CounterObj{Table: t, Name: counterServedSpoofed})
	}

	// Set IDs are chosen here, not by the library's package-global
	// allocator, so concurrent installs never race on it. They only need
	// to be unique within one batch.
	var nextID uint32
	addSet := func(s *nftables.Set, tuples []Tuple, keys [][]byte) *setElems {
		nextID++
		s.Table, s.ID = t, nextID
		// Declaring the size lets the kernel pick its fixed-size hash:
		// no rhashtable resize after a large insert, whose in-flight
		// rehash made a set dump repeat some elements and skip others
		// (seen with 10,000 tuples). It also bounds the set: adding an
		// element later fails (ENFILE) unless one is deleted first.
		s.Size = uint32(len(keys))
		se := &setElems{set: s, tuples: tuples, elems: make([]elem, len(keys))}
		for i, k := range keys {
			se.elems[i].Key = k
		}
		rs.sets = append(rs.sets, se)
		return se
	}
	// addCounted adds set s with its used set. Counting in a companion
	// rather than with an element counter in s itself costs the kernel
	// nothing per planned element: an element counter is a per-CPU
	// allocation, made twice at insert (the set's template is cloned,
	// then the clone), most of the install's time and half of its dump's
	// bytes for 10,000 tuples, while a contract's tuples are mostly never
	// used. The used set is as large as s. Were the kernel unable to add
	// an element (out of memory, or a slot two CPUs adding the same new
	// key raced for), only the count is lost: the add is in a rule of its
	// own (counted). A dynamic set is the kernel's resizable hash; the
	// declared size sizes it so that it never grows.
	addCounted := func(in *setElems) *countedSet {
		s := in.set
		u := addSet(&nftables.Set{Name: s.Name + usedSuffix, KeyType: s.KeyType, KeyByteOrder: s.KeyByteOrder, Dynamic: true}, nil, nil)
		u.set.Size = s.Size
		u.countsFor = in
		return &countedSet{in: s, used: u.set}
	}

	idKey := make([]byte, 8)
	binary.NativeEndian.PutUint64(idKey, p.Cgroup.ID)
	cg := addSet(&nftables.Set{Name: setCgroup, KeyType: nftables.TypeCGroupV2, KeyByteOrder: binaryutil.NativeEndian}, nil, [][]byte{idKey}).set

	// The allow sets are plain hash sets keyed by a concatenated type,
	// without the NFT_SET_CONCAT flag: nft(8) sets that flag only for
	// interval concatenations, and leaving it off makes this table
	// identical to what `nft -f` of the same text loads (P2 checks).
	// In netns scope both the cgroup's rules and the outside rules look
	// them up: one set, one used set counting both.
	var sets allowSets
	a4, a6, i4, i6 := splitTuples(p.Allow)
	if len(a4) > 0 {
		sets.a4 = addCounted(addSet(&nftables.Set{Name: setAllow4, KeyType: keyAllow4}, a4, tupleKeys(a4)))
	}
	if len(a6) > 0 {
		sets.a6 = addCounted(addSet(&nftables.Set{Name: setAllow6, KeyType: keyAllow6}, a6, tupleKeys(a6)))
	}
	if len(i4) > 0 {
		sets.i4 = addCounted(addSet(&nftables.Set{Name: setICMP4, KeyType: nftables.TypeIPAddr, KeyByteOrder: binaryutil.BigEndian}, i4, addrKeys(i4)))
	}
	if len(i6) > 0 {
		sets.i6 = addCounted(addSet(&nftables.Set{Name: setICMP6, KeyType: nftables.TypeIP6Addr, KeyByteOrder: binaryutil.BigEndian}, i6, addrKeys(i6)))
	}
	// The serve set, keyed by the container's local port: replies of
	// served connections leave from it (th sport). Hash set, no
	// NFT_SET_CONCAT flag, like the allow sets.
	if len(p.Serve) > 0 {
		in := addSet(&nftables.Set{Name: setServe, KeyType: keyServe}, nil, serveKeys(p.Serve))
		in.ports = p.Serve
		sets.serve = addCounted(in)
	}
	if p.needsND() {
		keys := make([][]byte, len(ndTypes))
		for i, ty := range ndTypes {
			keys[i] = []byte{ty}
		}
		sets.nd = addSet(&nftables.Set{Name: setND6, KeyType: nftables.TypeICMP6Type}, nil, keys).set
		sets.ndServe = !p.HasIPv6()
	}

	// Policy accept in cgroup scope: other cgroups in a shared namespace
	// pass untouched. Policy drop in netns scope, although the last rule
	// already drops everything: should the rules ever be flushed or
	// deleted (someone with CAP_NET_ADMIN over the namespace), the chain
	// still fails closed. Read-back compares the policy.
	policy := nftables.ChainPolicyAccept
	if netns {
		policy = nftables.ChainPolicyDrop
	}
	ch := &nftables.Chain{
		Name: chainName, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter,
		Policy: &policy,
	}
	rs.chains = []*nftables.Chain{ch}
	ruleIn := func(ch *nftables.Chain, comment string, exprs []expr.Any) {
		r := &nftables.Rule{
			Table: t, Chain: ch, Exprs: exprs,
			UserData: userdata.AppendString(nil, userdata.TypeComment, comment),
		}
		rs.rules = append(rs.rules, canonRule(r))
	}
	rule := func(comment string, exprs []expr.Any) { ruleIn(ch, comment, exprs) }
	if sets.serve != nil {
		serveInput(rs, ruleIn, p, cg, sets.serve)
	}

	// The cgroup's rules. Accepts first; every one starts with the cgroup
	// match, so a packet whose socket cannot be attributed matches none
	// of them. Then log (own rule: the rate limit must never gate the
	// drop) and drop what a process of the cgroup sent; then drop
	// everything else the cgroup's sockets emit — kernel replies from
	// namespace control sockets created inside the cgroup, data of
	// already-closed sockets — counted apart so "denied" means attempts
	// by the workload. A packet the kernel attributes to the cgroup never
	// gets past these rules.
	//
	// Before any accept, the cgroup's packets whose source is not an
	// address of the namespace are dropped (spoofed): the reply and serve
	// rules trust the source address and port, and a socket bound to a
	// foreign address with IPV6_FREEBIND (unprivileged) could otherwise
	// answer as an allowed tuple or a served port to anyone. Only a
	// duplicate address detection probe from :: is accepted ahead of
	// them, where neighbor discovery is.
	m := matcher{cg: cg, level: p.Cgroup.Level, allow: counterAllow}
	// First of all, no verdict: label the flows the cgroup's sockets open
	// (ownLabel), for the flow sensor, so that in a shared namespace a
	// flow another tenant opened to a target the container was denied is
	// never taken for the container's. The same rule in netns scope,
	// where the sensor takes every flow for the container's and reads
	// the label only to tell the container's own connections to its
	// served ports from a peer's.
	rule("gensee: label the flows the container opens", m.labelOwnFlow())
	nd := sets.nd != nil
	if nd {
		rule("gensee: icmpv6 duplicate address detection (source ::)", m.dad())
	}
	rule("gensee: log non-local source", m.logSpoofed(p.LogGroup, p.LogPrefix))
	rule("gensee: deny non-local source", m.denySpoofed())
	rule("gensee: deny non-local source, no owning process", m.denySpoofedKernel())
	// Source-routed packets next, before any accept: their destination
	// address is only the first hop.
	for _, r := range sourceRoutes() {
		rule("gensee: deny "+r.name, m.denySourceRouted(r))
		rule("gensee: deny "+r.name+", no owning process", m.denySourceRoutedKernel(r))
	}
	accepts(rule, m, p.Loopback, sets, "")
	rule("gensee: log denied", m.log(p.LogGroup, p.LogPrefix))
	rule("gensee: deny", m.deny())
	rule("gensee: deny, no owning process", m.denyKernel())
	if !netns {
		// A SYN-ACK leaves from a request socket, not a full one: no
		// cgroup rule can attribute it, and policy accept lets it pass
		// (TCP Fast Open's, sent by the child socket, excepted). This
		// rule only counts those sent from a served port, so
		// served_conn counts connections in this scope too; it accepts
		// nothing. Like every serve rule it requires the serve label,
		// which the input chain sets here only when the SYN reached a
		// listener of the cgroup.
		if sets.serve != nil {
			counted(rule, matcher{}, "count served connections answered"+outsideNote, func(m matcher) []expr.Any { return m.served(sets.serve, true, false) })
		}
		return rs
	}
	// Netns scope: what is left has no socket the kernel attributes to
	// the cgroup. The same accepts without the cgroup match, counted as
	// allowed_outside; then log every remaining packet and drop it.
	// Non-local sources first here too: a SYN-ACK or TIME_WAIT reply of
	// a socket bound to a foreign address has no cgroup, and the outside
	// serve and reply rules would accept it.
	o := matcher{allow: counterAllowO}
	if nd {
		rule("gensee: icmpv6 duplicate address detection (source ::)"+outsideNote, o.dad())
	}
	rule("gensee: log non-local source"+outsideNote, logSpoofedOutside(p.LogGroup, p.LogPrefixOutside))
	rule("gensee: deny non-local source"+outsideNote, denySpoofedOutside())
	for _, r := range sourceRoutes() {
		rule("gensee: deny "+r.name+outsideNote, denySourceRoutedOutside(r))
	}
	accepts(rule, o, p.Loopback, sets, outsideNote)
	rule("gensee: log denied"+outsideNote, logOutside(p.LogGroup, p.LogPrefixOutside))
	rule("gensee: deny"+outsideNote, denyOutside())
	return rs
}

// serveInput adds the input chain: a served port takes packets only from
// sources that route back where they came from (servedReversePath), over lo
// only from the namespace's own addresses (servedLoopback), and the flow of
// every packet they let through gets the serve label (labelServedFlow),
// which the output chain's served accepts require. In cgroup scope all
// three match only packets whose socket is the cgroup's; in netns scope
// every packet to a served port. Policy accept: this chain filters nothing else
// inbound. Its rules come before the output chain's in rs.rules, as a dump
// lists them (chains in the order they were added).
func serveInput(rs *ruleset, rule func(*nftables.Chain, string, []expr.Any), p *Plan, cg *nftables.Set, serve *countedSet) {
	accept := nftables.ChainPolicyAccept
	in := &nftables.Chain{
		Name: chainInput, Table: rs.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter,
		Policy: &accept,
	}
	rs.chains = append([]*nftables.Chain{in}, rs.chains...)
	m := matcher{}
	if p.Scope == ScopeCgroup {
		m = matcher{cg: cg, level: p.Cgroup.Level}
	}
	rule(in, "gensee: served ports, source not routed back through its interface (reverse path)", m.servedReversePath(serve))
	rule(in, "gensee: served ports, non-local source over loopback", m.servedLoopback(serve))
	rule(in, "gensee: served ports, label the flow its replies may use", m.labelServedFlow(serve))
}

// outsideNote ends the comment of every netns-scope rule for packets the
// cgroup's rules did not attribute.
const outsideNote = ", outside the cgroup"

// allowSets are the sets the accept rules look up; nil when the plan has
// no such tuple.
type allowSets struct {
	a4, a6, i4, i6, serve *countedSet
	nd                    *nftables.Set
	// ndServe: nd is there for served ports only (no IPv6 destination).
	ndServe bool
}

// countedSet is a set the rules look up and the used set they count its
// matches in.
type countedSet struct {
	in, used *nftables.Set
}

// accepts adds the accept rules of m in their fixed order. note ends each
// comment.
func accepts(rule func(string, []expr.Any), m matcher, loopback bool, s allowSets, note string) {
	// Served ports first, so "served" counts every reply of a served
	// connection, whatever else would accept it too. The SYN-ACK rule
	// comes before the reply rule: both look the port up, and the port's
	// element of serve_used counts once per rule that matches.
	if s.serve != nil {
		counted(rule, m, "served connections answered"+note, func(m matcher) []expr.Any { return m.served(s.serve, true, true) })
		counted(rule, m, "replies on served ports"+note, func(m matcher) []expr.Any { return m.served(s.serve, false, true) })
	}
	if loopback {
		rule("gensee: loopback allowed by contract"+note, m.loopback())
	}
	if s.a4 != nil {
		counted(rule, m, "allowed ipv4 tuples"+note, func(m matcher) []expr.Any { return m.tuples(v4, s.a4, false) })
		counted(rule, m, "replies from allowed ipv4 tuples"+note, func(m matcher) []expr.Any { return m.tuples(v4, s.a4, true) })
	}
	if s.a6 != nil {
		counted(rule, m, "allowed ipv6 tuples"+note, func(m matcher) []expr.Any { return m.tuples(v6, s.a6, false) })
		counted(rule, m, "replies from allowed ipv6 tuples"+note, func(m matcher) []expr.Any { return m.tuples(v6, s.a6, true) })
	}
	if s.i4 != nil {
		counted(rule, m, "allowed icmp destinations"+note, func(m matcher) []expr.Any { return m.icmp(v4, s.i4) })
	}
	if s.i6 != nil {
		counted(rule, m, "allowed icmpv6 destinations"+note, func(m matcher) []expr.Any { return m.icmp(v6, s.i6) })
	}
	if s.nd != nil {
		what := "allowed ipv6"
		if s.ndServe {
			what = "served ports"
		}
		rule("gensee: icmpv6 neighbor discovery for "+what+note, m.nd(s.nd))
	}
}

// counted adds the rule "gensee: <what>" that exprs builds for m, after the
// rule that counts its matches per element in the counted set's used set
// ("gensee: count per element, <what>"). Apart, so that a key the kernel
// cannot add to the used set (out of memory, or a slot two CPUs raced for
// when the set is nearly full) costs a count, never the packet.
func counted(rule func(string, []expr.Any), m matcher, what string, exprs func(matcher) []expr.Any) {
	rule("gensee: count per element, "+what, exprs(m.counter()))
	rule("gensee: "+what, exprs(m))
}

// tupleKeys encodes concatenated keys: addr | proto + 3 pad | port (BE) + 2 pad.
// All keys of a set share one backing array.
func tupleKeys(ts []Tuple) [][]byte {
	if len(ts) == 0 {
		return nil
	}
	n := ts[0].Addr.BitLen()/8 + 8
	buf := make([]byte, n*len(ts))
	keys := make([][]byte, len(ts))
	for i, tu := range ts {
		k := buf[i*n : (i+1)*n : (i+1)*n]
		if tu.Addr.Is4() {
			a := tu.Addr.As4()
			copy(k, a[:])
		} else {
			a := tu.Addr.As16()
			copy(k, a[:])
		}
		k[n-8] = tu.Proto
		binary.BigEndian.PutUint16(k[n-4:], tu.Port)
		keys[i] = k
	}
	return keys
}

// serveKeys encodes proto + 3 pad | port (BE) + 2 pad.
func serveKeys(ps []ServePort) [][]byte {
	buf := make([]byte, 8*len(ps))
	keys := make([][]byte, len(ps))
	for i, s := range ps {
		k := buf[i*8 : (i+1)*8 : (i+1)*8]
		k[0] = s.Proto
		binary.BigEndian.PutUint16(k[4:], s.Port)
		keys[i] = k
	}
	return keys
}

func addrKeys(ts []Tuple) [][]byte {
	keys := make([][]byte, len(ts))
	for i, tu := range ts {
		keys[i] = tu.Addr.AsSlice()
	}
	return keys
}

// splitTuples groups tuples by the set they go in: tcp/udp over IPv4 and
// IPv6, ICMP and ICMPv6 destinations.
func splitTuples(ts []Tuple) (a4, a6, i4, i6 []Tuple) {
	group := func(t Tuple) int {
		switch {
		case t.Port != 0 && t.Addr.Is4():
			return 0
		case t.Port != 0:
			return 1
		case t.Addr.Is4():
			return 2
		}
		return 3
	}
	var n [4]int
	for _, t := range ts {
		n[group(t)]++
	}
	g := [4][]Tuple{make([]Tuple, 0, n[0]), make([]Tuple, 0, n[1]), make([]Tuple, 0, n[2]), make([]Tuple, 0, n[3])}
	for _, t := range ts {
		i := group(t)
		g[i] = append(g[i], t)
	}
	return g[0], g[1], g[2], g[3]
}
