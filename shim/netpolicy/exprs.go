package netpolicy

import (
	"encoding/binary"
	"math/bits"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Registers as nft(8) allocates them, so a dump reads back identically: the
// kernel prints 16-byte-aligned 32-bit registers as NFT_REG_1..4.
const (
	reg1      = unix.NFT_REG_1    // 16-byte register 1 (= 32-bit register 0)
	reg2      = unix.NFT_REG_2    // 16-byte register 2 (= 32-bit register 4)
	reg32_01  = unix.NFT_REG32_01 // 9
	reg32_02  = unix.NFT_REG32_02 // 10
	reg32_05  = unix.NFT_REG32_05 // 13
	ctDirOrig = 0                 // IP_CT_DIR_ORIGINAL
	ctDirRepl = 1                 // IP_CT_DIR_REPLY
	tcpSynAck = 0x12              // TCPHDR_SYN | TCPHDR_ACK
	loIfindex = 1                 // LOOPBACK_IFINDEX, the same in every netns
	logRate   = 20                // denied packets logged per second, at most
	logBurst  = 40
)

// family describes where an address family keeps what the rules load.
type family struct {
	nfproto           byte
	saddrOff, addrOff uint32 // in the network header
	addrLen           uint32
	protoReg, portReg uint32 // registers after the address in a concatenation
	icmp              uint8
}

var (
	v4 = family{nfproto: unix.NFPROTO_IPV4, saddrOff: 12, addrOff: 16, addrLen: 4, protoReg: reg32_01, portReg: reg32_02, icmp: ProtoICMP}
	v6 = family{nfproto: unix.NFPROTO_IPV6, saddrOff: 8, addrOff: 24, addrLen: 16, protoReg: reg2, portReg: reg32_05, icmp: ProtoICMPv6}
)

// matcher builds rule expressions. With a cgroup set every rule begins with
// the cgroup match: `socket cgroupv2 level N @cg`. The kernel skips the rest
// of a rule (NFT_BREAK) when the packet has no full socket in this namespace
// or the socket's cgroup is shallower than N, so an unattributable packet
// can only ever fail to match — never be accepted by a cgroup rule. Without
// one (cg nil: netns scope, after the cgroup's rules) the rules match any
// packet. Accepts count in the named counter allow.
//
// A matcher that counts (counter) builds instead the rule that goes ahead of
// each rule looking up a counted set: the same match, the key added to the
// set's used set, no counter, no verdict.
type matcher struct {
	cg    *nftables.Set
	level uint32
	allow string
	count bool
}

// counter is m building the per-element counting rules.
func (m matcher) counter() matcher {
	m.count = true
	return m
}

// tail is what follows a counted set's match: nothing in a counting rule.
func (m matcher) tail(e ...expr.Any) []expr.Any {
	if m.count {
		return nil
	}
	return e
}

func (m matcher) cgroup() []expr.Any {
	if m.cg == nil {
		return nil
	}
	return []expr.Any{
		&expr.Socket{Key: expr.SocketKeyCgroupv2, Level: m.level, Register: reg1},
		&expr.Lookup{SourceRegister: reg1, SetName: m.cg.Name, SetID: m.cg.ID},
	}
}

func join(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func cmpEq(reg uint32, data []byte) *expr.Cmp {
	return &expr.Cmp{Op: expr.CmpOpEq, Register: reg, Data: data}
}

func load(base expr.PayloadBase, off, n, reg uint32) *expr.Payload {
	return &expr.Payload{OperationType: expr.PayloadLoad, DestRegister: reg, Base: base, Offset: off, Len: n}
}

func nfproto(f family) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: reg1}, cmpEq(reg1, []byte{f.nfproto})}
}

func accept(counter string) []expr.Any {
	return []expr.Any{
		&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counter},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
}

// loopback: cgroup ∧ oif lo → allowed, accept.
func (m matcher) loopback() []expr.Any {
	oif := make([]byte, 4)
	binary.NativeEndian.PutUint32(oif, loIfindex)
	return join(m.cgroup(), []expr.Any{&expr.Meta{Key: expr.MetaKeyOIF, Register: reg1}, cmpEq(reg1, oif)}, accept(m.allow))
}

// tuples: cgroup ∧ family ∧ daddr . l4proto . th dport ∈ set → allowed, accept.
// With reply, the reverse: cgroup ∧ ct direction reply ∧ saddr . l4proto .
// th sport ∈ set, i.e. the cgroup answering on a flow whose served end is an
// allowed tuple (a server on an allowed loopback tuple). A non-first
// fragment has no transport header: the payload load breaks, no match.
func (m matcher) tuples(f family, set *countedSet, reply bool) []expr.Any {
	addr, port := f.addrOff, uint32(2)
	var dir []expr.Any
	if reply {
		addr, port = f.saddrOff, 0
		dir = ctReply()
	}
	return join(m.cgroup(), dir, nfproto(f), m.match(set, func() []expr.Any {
		return []expr.Any{
			load(expr.PayloadBaseNetworkHeader, addr, f.addrLen, reg1),
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: f.protoReg},
			load(expr.PayloadBaseTransportHeader, port, 2, f.portReg),
		}
	}), m.tail(accept(m.allow)...))
}

// match is key ∈ s.in; in a counting rule, then the key added to s.used
// with a counter (`add @s.used { key counter }`), which counts the match.
// The counter is the add's, not the set's: the kernel dumps an add's
// expressions only for a set that has none, so only this way does
// read-back see that it starts at zero. key
// loads the key into register 1 onward; a counting rule calls it twice, as
// nft(8) compiles the add: the lookup's registers loaded again. An add of a
// key already there changes nothing but the element's counter; unlike an
// update it needs no set timeout on any kernel.
func (m matcher) match(s *countedSet, key func() []expr.Any) []expr.Any {
	e := join(key(), []expr.Any{&expr.Lookup{SourceRegister: reg1, SetName: s.in.Name, SetID: s.in.ID}})
	if !m.count {
		return e
	}
	return join(e, key(), []expr.Any{&expr.Dynset{SrcRegKey: reg1, SetName: s.used.Name, SetID: s.used.ID, Operation: unix.NFT_DYNSET_OP_ADD,
		Exprs: []expr.Any{&expr.Counter{}}}})
}

func ctReply() []expr.Any {
	return []expr.Any{&expr.Ct{Register: reg1, Key: expr.CtKeyDIRECTION}, cmpEq(reg1, []byte{ctDirRepl})}
}

// served: cgroup ∧ ct direction reply ∧ l4proto . th sport ∈ serve →
// served, accept: the container answering on a connection that arrived on
// one of its served ports (the local port is the reply's source port). No
// family match: meta l4proto and th work on IPv4 and IPv6 alike. With
// synack, only TCP segments with SYN and ACK set (`tcp flags & (syn|ack) ==
// syn|ack`, the first reply), counted in served_conn as well. Without
// terminal, the rule only counts (cgroup scope's unattributed SYN-ACKs).
//
// A packet of a connection the container opened is in the original
// direction whatever its source port, so binding a served port gains an
// outbound connection nothing: its first packet meets the deny rules, and a
// dropped packet never confirms a conntrack entry.
//
// Only on a flow the input chain labelled (servedFlow): one whose inbound
// packet to the served port passed the reverse-path rules, and in cgroup
// scope reached a socket of the cgroup. A conntrack entry a forged
// datagram created before the workload bound the port (no socket: the
// input chain's cgroup rules skip it) carries no label, and the workload
// cannot answer on it.
func (m matcher) served(set *countedSet, synack, terminal bool) []expr.Any {
	e := join(m.cgroup(), ctReply(), servedFlow())
	if synack {
		e = append(e,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1}, cmpEq(reg1, []byte{ProtoTCP}),
			load(expr.PayloadBaseTransportHeader, 13, 1, reg1),
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 1, Mask: []byte{tcpSynAck}, Xor: []byte{0}},
			cmpEq(reg1, []byte{tcpSynAck}))
	}
	e = append(e, m.match(set, func() []expr.Any {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			load(expr.PayloadBaseTransportHeader, 0, 2, reg32_01),
		}
	})...)
	if m.count {
		return e
	}
	e = append(e, &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counterServed})
	if synack {
		e = append(e, &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counterServedConn})
	}
	if terminal {
		e = append(e, &expr.Verdict{Kind: expr.VerdictAccept})
	}
	return e
}

// icmp: cgroup ∧ family ∧ l4proto icmp(v6) ∧ daddr ∈ set → allowed, accept.
// ICMP has no ports: a th dport load would read the checksum.
func (m matcher) icmp(f family, set *countedSet) []expr.Any {
	return join(m.cgroup(), nfproto(f), []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1}, cmpEq(reg1, []byte{f.icmp}),
	}, m.match(set, func() []expr.Any {
		return []expr.Any{load(expr.PayloadBaseNetworkHeader, f.addrOff, f.addrLen, reg1)}
	}), m.tail(accept(m.allow)...))
}

// nd: cgroup ∧ ipv6 ∧ icmpv6 type ∈ {RS, NS, NA} → allowed, accept. Needed
// when the namespace's kernel sockets were created inside the container's
// cgroup (runc does so) and the contract allows IPv6.
func (m matcher) nd(set *nftables.Set) []expr.Any {
	return join(m.cgroup(), nfproto(v6), []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1}, cmpEq(reg1, []byte{ProtoICMPv6}),
		load(expr.PayloadBaseTransportHeader, 0, 1, reg1),
		&expr.Lookup{SourceRegister: reg1, SetName: set.Name, SetID: set.ID},
	}, accept(m.allow))
}

// owned is `meta skuid >= 0` as nft(8) compiles it: always true when it
// evaluates, and it evaluates only for a socket with an open file, i.e. one
// a process owns. Kernel control sockets (TCP resets, ICMP errors, neighbor
// discovery) and closed sockets make it break. It only ever narrows what the
// log and "denied" rules count; the final rule drops those packets anyway.
func owned() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: reg1},
		&expr.Byteorder{SourceRegister: reg1, DestRegister: reg1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpGte, Register: reg1, Data: []byte{0, 0, 0, 0}},
	}
}

// log: cgroup ∧ owned ∧ limit → log to NFLOG group. Non-terminal and alone
// in its rule, so when the limit is exhausted only logging stops, never the
// drop.
func (m matcher) log(group uint16, prefix string) []expr.Any {
	return join(m.cgroup(), owned(), logLimited(group, prefix))
}

func logLimited(group uint16, prefix string) []expr.Any {
	return []expr.Any{
		&expr.Limit{Type: expr.LimitTypePkts, Rate: logRate, Unit: expr.LimitTimeSecond, Burst: logBurst},
		&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX, Group: group, Data: []byte(prefix)},
	}
}

// logOutside: limit → log, netns scope, for every packet the accepts
// without cgroup match did not take: a process of another cgroup, or a
// kernel socket (its NFLOG record carries no uid). Its own rate limit, so
// the workload's log budget is never spent on these.
func logOutside(group uint16, prefix string) []expr.Any {
	return logLimited(group, prefix)
}

// denyOutside: → denied_outside, drop. The last rule in netns scope.
func denyOutside() []expr.Any {
	return []expr.Any{
		&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counterDenyO},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// deny: cgroup ∧ owned → denied, drop: what a process of the cgroup sent
// that no accept above matched.
func (m matcher) deny() []expr.Any {
	return join(m.cgroup(), owned(), []expr.Any{
		&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counterDeny},
		&expr.Verdict{Kind: expr.VerdictDrop},
	})
}

// denyKernel: cgroup → denied_kernel, drop. The last rule: every packet of
// the cgroup's sockets that nothing above accepted ends here at the latest.
func (m matcher) denyKernel() []expr.Any {
	return join(m.cgroup(), []expr.Any{
		&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counterDenyK},
		&expr.Verdict{Kind: expr.VerdictDrop},
	})
}

// notLocalSource is `fib saddr type != local`: the packet's source address
// is not an address of this namespace. The kernel evaluates it in the output
// hook (NFT_FIB_RESULT_ADDRTYPE is valid in every hook) with no interface
// restriction: IPv4 looks the address up in the local table
// (inet_dev_addr_type), IPv6 routes to it and asks for RTF_LOCAL. Loopback
// (127.0.0.0/8, ::1) and the link-local addresses of the namespace's
// interfaces are local; broadcast, multicast, 0.0.0.0, :: and every address
// the namespace does not own are not. A socket bound with IP(V6)_FREEBIND,
// IP_TRANSPARENT or net.ipv[46].ip_nonlocal_bind, or a raw socket writing its
// own header, sends with any source it likes (an IPv6 socket does it for
// IPv4 too, through a v4-mapped address), and the reply and serve rules
// trust the source: this match runs before them.
func notLocalSource() []expr.Any {
	local := make([]byte, 4)
	binary.NativeEndian.PutUint32(local, unix.RTN_LOCAL)
	return []expr.Any{
		&expr.Fib{Register: reg1, FlagSADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: local},
	}
}

// dad: cgroup ∧ ipv6 ∧ ip6 saddr :: ∧ icmpv6 type neighbor solicit →
// allowed, accept. A duplicate address detection probe is the one packet
// that legitimately leaves without a local source (RFC 4862 §5.4.2: an
// address under test is not assigned yet). It precedes the non-local source
// drop, only where the table accepts neighbor discovery at all. Linux sends
// router solicitations from a link-local address only, and a neighbor
// advertisement must come from an address of the interface (RFC 4861 §7.2.4),
// so neither is exempt.
func (m matcher) dad() []expr.Any {
	return join(m.cgroup(), nfproto(v6), []expr.Any{
		load(expr.PayloadBaseNetworkHeader, v6.saddrOff, v6.addrLen, reg1),
		cmpEq(reg1, make([]byte, 16)),
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1}, cmpEq(reg1, []byte{ProtoICMPv6}),
		load(expr.PayloadBaseTransportHeader, 0, 1, reg1),
		cmpEq(reg1, []byte{ndNeighborSolicit}),
	}, accept(m.allow))
}

// logSpoofed: cgroup ∧ source not local ∧ owned ∧ limit → log, with the
// deny prefix: a workload sending from an address it does not own is a
// denied attempt, and its own rule keeps the rate limit from gating the drop.
func (m matcher) logSpoofed(group uint16, prefix string) []expr.Any {
	return join(m.cgroup(), notLocalSource(), owned(), logLimited(group, prefix))
}

// denySpoofed: cgroup ∧ source not local ∧ owned → spoofed, denied, drop.
func (m matcher) denySpoofed() []expr.Any {
	return join(m.cgroup(), notLocalSource(), owned(), countDrop(counterSpoofed, counterDeny))
}

// denySpoofedKernel: cgroup ∧ source not local → spoofed, denied_kernel,
// drop: the cgroup's sockets no process owns (the namespace's multicast
// listener reports from ::, sent while no link-local address is usable).
func (m matcher) denySpoofedKernel() []expr.Any {
	return join(m.cgroup(), notLocalSource(), countDrop(counterSpoofed, counterDenyK))
}

// logSpoofedOutside, denySpoofedOutside: the same, netns scope, for packets
// the cgroup's rules did not attribute (another cgroup, kernel sockets,
// SYN-ACKs of request sockets, TIME_WAIT): counted in denied_outside.
func logSpoofedOutside(group uint16, prefix string) []expr.Any {
	return join(notLocalSource(), logLimited(group, prefix))
}

func denySpoofedOutside() []expr.Any {
	return join(notLocalSource(), countDrop(counterSpoofed, counterDenyO))
}

func countDrop(counters ...string) []expr.Any {
	var e []expr.Any
	for _, c := range counters {
		e = append(e, &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: c})
	}
	return append(e, &expr.Verdict{Kind: expr.VerdictDrop})
}

// servedReversePath: cgroup ∧ iif != lo ∧ l4proto . th dport ∈ serve ∧ `fib
// saddr . iif oif missing` → served_spoofed, drop. In the input chain: a
// packet to a served port whose source the namespace would not route back
// out of the interface it arrived on (strict reverse path, RFC 3704 §2.2).
// A peer answers only through conntrack, and an unconfirmed entry dies
// with its dropped packet: one forged datagram from D must not make the
// workload's replies to D "served". Loopback is left to servedLoopback:
// kernels before nft_fib_can_skip (6.15) would find no route back through
// lo for the namespace's own addresses and drop every local client. The
// match is the local port (dport inbound); in cgroup scope the socket the
// kernel looks up for the packet must be the cgroup's.
func (m matcher) servedReversePath(set *countedSet) []expr.Any {
	lo := make([]byte, 4)
	binary.NativeEndian.PutUint32(lo, loIfindex)
	return join(m.cgroup(), []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIF, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: lo},
	}, servedPort(set), []expr.Any{
		&expr.Fib{Register: reg1, FlagSADDR: true, FlagIIF: true, ResultOIF: true, FlagPRESENT: true},
		cmpEq(reg1, []byte{0, 0, 0, 0}),
	}, countDrop(counterServedSpoofed))
}

// servedLoopback: cgroup ∧ iif lo ∧ l4proto . th dport ∈ serve ∧ source not
// local → served_spoofed, drop. Over lo a packet comes from this very
// namespace, so its source must be one of its addresses; in cgroup scope
// the table's output rules check only the cgroup's own sockets, and another
// tenant's forged source would otherwise make the workload answer it. The
// drop alone does not undo the flow: a local packet's conntrack entry is
// confirmed at output, before it loops back to input. What refuses the
// answer is that a dropped packet never reaches labelServedFlow.
func (m matcher) servedLoopback(set *countedSet) []expr.Any {
	lo := make([]byte, 4)
	binary.NativeEndian.PutUint32(lo, loIfindex)
	return join(m.cgroup(), []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIF, Register: reg1}, cmpEq(reg1, lo),
	}, servedPort(set), notLocalSource(), countDrop(counterServedSpoofed))
}

// serveLabel is the conntrack label bit (`ct label 26`; 0..127, nft(8)
// prints the number, connlabel.conf may name it) marking a flow on which a
// served port may answer. A label, not a ct mark: software that sets the
// whole ct mark (CONNMARK --save-mark, `ct mark set meta mark`) would
// clear a bit of it or set it with its own value, while a label is only
// ever added bit by bit (the kernel ORs `ct label set` into the labels;
// nothing here clears it). OVN, the one known user of labels, uses bits
// 0, 1 and 32..127. The bit is the same in every gensee table of a
// namespace: each sets it only on a packet its own reverse-path drops let
// through, and those test the packet's source, not the table (the table
// only decides which packets it checks).
const serveLabel = 26

// ownLabel is the conntrack label bit (`ct label 27`) marking a flow the
// container opened: the output chain's first rule sets it on every packet
// in the original direction of a flow that a socket of the cgroup sends
// (cgroup scope) or that the namespace sends (netns scope), before any
// rule that drops. A flow a peer opened never has its original direction
// through the output chain, so a served flow carries it only when the
// container connected to its own served port. The flow sensor reads it: in
// a shared namespace only a flow carrying it is the container's reaching a
// target, and a flow carrying it is never a peer the container answered.
// A label for the reasons serveLabel is one; the same bit in every gensee
// table of a namespace, each setting it for its own cgroup only.
const ownLabel = 27

// Conntrack label bits the flow sensor reads (shim/watchdog/evidence).
const (
	ServeLabel = serveLabel // a packet to a served port passed the reverse-path check
	OwnLabel   = ownLabel   // the container sent in the flow's original direction
)

// HasLabel says whether label bit is set in labels, a conntrack entry's
// label bitmap as ctnetlink dumps it (CTA_LABELS: the kernel's unsigned
// longs in host byte order, as labelBitsOf writes it). Empty labels (an
// entry without the extension, or none set) have no bit.
func HasLabel(labels []byte, bit int) bool {
	want := labelBitsOf(bit)
	for i := range want {
		if i < len(labels) && labels[i]&want[i] != 0 {
			return true
		}
	}
	return false
}

// labelBits is serveLabel as the kernel keeps the labels.
func labelBits() []byte { return labelBitsOf(serveLabel) }

// labelBitsOf is label bit as the kernel keeps the labels: a bitmap of
// unsigned longs in host byte order (16 bytes, NF_CT_LABELS_MAX_SIZE).
func labelBitsOf(bit int) []byte {
	b := make([]byte, 16)
	if bit < 0 || bit >= 128 {
		return b
	}
	if bits.UintSize == 64 {
		binary.NativeEndian.PutUint64(b[bit/64*8:], 1<<(bit%64))
	} else {
		binary.NativeEndian.PutUint32(b[bit/32*4:], 1<<(bit%32))
	}
	return b
}

// servedFlow is `ct label 26` as nft(8) compiles it: the flow carries the
// serve label. A conntrack entry without the labels extension (created
// while no rule in the namespace used labels: before the first served
// table was installed) loads as all zeroes and never matches.
func servedFlow() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: reg1, Key: expr.CtKeyLABELS},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 16, Mask: labelBits(), Xor: make([]byte, 16)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: make([]byte, 16)},
	}
}

// labelServedFlow: cgroup ∧ l4proto . th dport ∈ serve → ct label set 26.
// In the input chain after servedReversePath and servedLoopback, so only a
// packet both let through gets here: its flow becomes one the served
// accepts may answer on. In cgroup scope only a packet whose socket is the
// cgroup's: a datagram that arrived before the workload bound the port, or
// for another cgroup's socket, was never checked on the cgroup's behalf,
// and its flow stays unlabelled until a later packet of it, to the
// cgroup's socket, passes the check (a genuine peer's retry). The kernel
// ORs the label in (nf_connlabels_replace with the bit as mask), on an
// unconfirmed entry as on a confirmed one.
func (m matcher) labelServedFlow(set *countedSet) []expr.Any {
	return join(m.cgroup(), servedPort(set), []expr.Any{
		&expr.Immediate{Register: reg1, Data: labelBits()},
		&expr.Ct{Register: reg1, SourceRegister: true, Key: expr.CtKeyLABELS},
	})
}

// labelOwnFlow: cgroup ∧ ct direction original → ct label set 27
// (ownLabel), no verdict, no counter: the output chain's first rule, so
// every packet the cgroup's sockets (netns scope: the namespace) send in a
// flow's original direction labels it before any rule can drop or accept
// it. A flow the table then accepts is confirmed labelled; a dropped
// first packet never confirms its entry, so a denied attempt leaves no
// labelled flow. The original direction only: the container's answers on
// a flow a peer opened (served ports) do not make it one the container
// opened.
func (m matcher) labelOwnFlow() []expr.Any {
	return join(m.cgroup(), []expr.Any{
		&expr.Ct{Register: reg1, Key: expr.CtKeyDIRECTION}, cmpEq(reg1, []byte{ctDirOrig}),
		&expr.Immediate{Register: reg1, Data: labelBitsOf(ownLabel)},
		&expr.Ct{Register: reg1, SourceRegister: true, Key: expr.CtKeyLABELS},
	})
}

// servedPort is `meta l4proto . th dport @serve`: the packet is addressed to
// a served local port.
func servedPort(set *countedSet) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
		load(expr.PayloadBaseTransportHeader, 2, 2, reg32_01),
		&expr.Lookup{SourceRegister: reg1, SetName: set.in.Name, SetID: set.in.ID},
	}
}

// Source routing. NFT_EXTHDR_OP_IPV4 (Linux 5.3) is missing from x/sys.
const (
	exthdrOpIPv4 = expr.ExthdrOp(2)
	ipoptLSRR    = 131 // IPOPT_LSRR, RFC 791
	ipoptSSRR    = 137 // IPOPT_SSRR
	ip6RoutingHd = 43  // NEXTHDR_ROUTING, RFC 8200 §4.4
)

// srcRoute is one way a packet names hops beyond its destination address.
type srcRoute struct {
	name  string
	match []expr.Any
}

// sourceRoutes are every header that makes a packet travel past its
// destination address to addresses only the header names: the IPv4 loose
// and strict source route options (the only IPv4 options that change the
// path, RFC 791 §3.1; RFC 7126 §4.3-4.4 recommends dropping them) and the
// IPv6 routing header, whatever its type (RFC 8200 §4.4; type 0 deprecated
// by RFC 5095, type 4 is segment routing, RFC 8754). A workload sets them
// without any capability (IP_OPTIONS, IPV6_RTHDR with a type 2 or 4
// header), and the kernel then sends to the first hop: the table, which
// matches the destination address, would see only that hop. As nft(8)
// compiles `ip option lsrr exists` and `exthdr rt exists` in an inet table,
// each behind its family's `meta nfproto` (the IPv6 header walk must never
// run over an IPv4 packet).
func sourceRoutes() []srcRoute {
	present := func(f family, op expr.ExthdrOp, ty uint8) []expr.Any {
		return append(nfproto(f),
			&expr.Exthdr{Op: op, Type: ty, Offset: 0, Len: 1, Flags: unix.NFT_EXTHDR_F_PRESENT, DestRegister: reg1},
			cmpEq(reg1, []byte{1}))
	}
	return []srcRoute{
		{"ipv4 loose source route", present(v4, exthdrOpIPv4, ipoptLSRR)},
		{"ipv4 strict source route", present(v4, exthdrOpIPv4, ipoptSSRR)},
		{"ipv6 routing header", present(v6, expr.ExthdrOpIpv6, ip6RoutingHd)},
	}
}

// denySourceRouted: cgroup ∧ source-routed ∧ owned → source_routed, denied,
// drop. Not logged: the only destination a log record could name is the
// first hop, which may be an allowed tuple.
func (m matcher) denySourceRouted(r srcRoute) []expr.Any {
	return join(m.cgroup(), r.match, owned(), countDrop(counterSourceRouted, counterDeny))
}

// denySourceRoutedKernel: cgroup ∧ source-routed → source_routed,
// denied_kernel, drop (a kernel reply echoing a route it received).
func (m matcher) denySourceRoutedKernel(r srcRoute) []expr.Any {
	return join(m.cgroup(), r.match, countDrop(counterSourceRouted, counterDenyK))
}

// denySourceRoutedOutside: source-routed → source_routed, denied_outside,
// drop; netns scope, packets no cgroup rule attributed.
func denySourceRoutedOutside(r srcRoute) []expr.Any {
	return join(r.match, countDrop(counterSourceRouted, counterDenyO))
}
