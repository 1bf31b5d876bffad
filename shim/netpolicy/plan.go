package netpolicy

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/gensee/gensee/spec"
)

// TablePrefix starts the name of every table this package manages.
const TablePrefix = "gensee_"

// DefaultLogGroup is the NFLOG group denied packets are logged to. NFLOG
// groups are per network namespace; the log prefix names the operation.
const DefaultLogGroup uint16 = 2604

// Protocol numbers a tuple may carry.
const (
	ProtoICMP   uint8 = 1
	ProtoTCP    uint8 = 6
	ProtoUDP    uint8 = 17
	ProtoICMPv6 uint8 = 58
)

// CgroupRef names the container's cgroup v2 as nftables matches it.
type CgroupRef struct {
	Path  string // cgroup path, e.g. "/kubepods/pod1/c1" (for messages)
	ID    uint64 // kernfs id of the cgroup directory (cgroup.Hierarchy.ID)
	Level uint32 // depth below the loader's cgroup namespace root (cgroup.Level)
}

// Tuple is one exact allowed destination. Port is zero for ICMP.
type Tuple struct {
	Addr  netip.Addr
	Proto uint8
	Port  uint16
}

func (t Tuple) String() string {
	p := ProtoName(t.Proto)
	if t.Port == 0 {
		return t.Addr.String() + " " + p
	}
	return netip.AddrPortFrom(t.Addr, t.Port).String() + "/" + p
}

// ProtoName is the contract spelling of protocol number p ("tcp", "udp",
// "icmp", "icmpv6"), or "proto-<n>" for any other.
func ProtoName(p uint8) string {
	switch p {
	case ProtoTCP:
		return spec.ProtoTCP
	case ProtoUDP:
		return spec.ProtoUDP
	case ProtoICMP:
		return spec.ProtoICMP
	case ProtoICMPv6:
		return spec.ProtoICMPv6
	}
	return fmt.Sprintf("proto-%d", p)
}

// ServePort is one local port the workload serves: tcp or udp.
type ServePort struct {
	Proto uint8 // ProtoTCP or ProtoUDP
	Port  uint16
}

func (s ServePort) String() string { return fmt.Sprintf("%d/%s", s.Port, ProtoName(s.Proto)) }

// Scope says which packets of the namespace a table holds to the contract.
type Scope string

const (
	// ScopeCgroup holds only the sockets of the container's cgroup v2
	// subtree to the contract; every other packet of the namespace passes
	// (chain policy accept). For namespaces the container shares: the
	// host's, a pod's sandbox. A process that leaves the cgroup, and a
	// packet without a full socket, are not filtered.
	ScopeCgroup Scope = "cgroupv2"
	// ScopeNetns fails closed: the namespace is the container's own (runc
	// made it), so after the cgroup's own rules have counted and dropped
	// what the workload's cgroup attempted, every other packet of the
	// namespace — other cgroups, kernel sockets, no socket at all — is
	// accepted only if the contract allows it (same sets, no cgroup match)
	// and otherwise counted in denied_outside, logged with LogPrefixOutside
	// and dropped; chain policy drop. Leaving the cgroup gains nothing.
	ScopeNetns Scope = "netns"
)

// Plan is the validated network authority of one operation: everything
// Install needs, computed without touching the kernel.
type Plan struct {
	OperationID string
	Table       string // gensee_<first 12 chars of the operation id>, family inet
	Mode        string // spec.NetworkDenyAll | spec.NetworkAllowExact
	Scope       Scope  // ScopeCgroup or ScopeNetns; set by the constructor
	Loopback    bool   // accept anything the cgroup (netns scope: anyone) sends out of lo
	Cgroup      CgroupRef
	Allow       []Tuple // sorted, unique; IPv4-mapped IPv6 addresses unmapped
	// Serve lists the local ports the workload accepts connections on
	// (network.serve): the table accepts the replies of connections that
	// arrived on one. Sorted (protocol, then port), unique.
	Serve    []ServePort
	LogGroup uint16
	// LogPrefix marks NFLOG records of the cgroup's denied attempts:
	// "gensee deny <op> ".
	LogPrefix string
	// LogPrefixOutside marks, in netns scope only, NFLOG records of denied
	// packets no cgroup rule saw (another cgroup's, kernel sockets'):
	// "gensee outside <op> ". Same group as LogPrefix. Empty in cgroup
	// scope.
	LogPrefixOutside string
	// Implicit lists what the table accepts beyond the contract's own
	// tuples, in words, for the manifest. Never hidden.
	Implicit []string
}

// NewPlan validates a contract's network section and builds the plan for
// operation opID, scoped to cgroup cg (ScopeCgroup). It refuses anything it
// does not understand rather than widening or narrowing it.
func NewPlan(opID string, n spec.Network, cg CgroupRef) (*Plan, error) {
	return NewPlanScoped(opID, n, cg, ScopeCgroup)
}

// NewPlanScoped is NewPlan with an explicit scope. Pass ScopeNetns only for a
// namespace no one but the container uses (runc created it); in a shared one
// it would drop the other tenants' traffic.
func NewPlanScoped(opID string, n spec.Network, cg CgroupRef, scope Scope) (*Plan, error) {
	if err := checkOpID(opID); err != nil {
		return nil, err
	}
	if err := checkScope(scope); err != nil {
		return nil, fmt.Errorf("plan network for %s: %w", opID, err)
	}
	if cg.ID == 0 {
		return nil, fmt.Errorf("plan network for %s: cgroup id is 0: pass the container's cgroup v2 id (cgroup.Hierarchy.ID)", opID)
	}
	if cg.Level == 0 {
		return nil, fmt.Errorf("plan network for %s: cgroup %q is the root cgroup (level 0): run the container in its own cgroup; refusing to scope a policy to every socket", opID, cg.Path)
	}
	p := &Plan{
		OperationID: opID,
		Table:       TableName(opID),
		Mode:        n.Mode,
		Scope:       scope,
		Cgroup:      cg,
		LogGroup:    DefaultLogGroup,
		LogPrefix:   "gensee deny " + short(opID) + " ",
	}
	if scope == ScopeNetns {
		p.LogPrefixOutside = "gensee outside " + short(opID) + " "
	}
	switch n.Loopback {
	case "", spec.LoopbackDeny:
	case spec.LoopbackAllow:
		p.Loopback = true
		p.Implicit = append(p.Implicit, "loopback: everything the cgroup sends out of lo (contract loopback: allow)")
	default:
		return nil, fmt.Errorf("network.loopback: %q is not %q or %q", n.Loopback, spec.LoopbackDeny, spec.LoopbackAllow)
	}
	switch n.Mode {
	case spec.NetworkDenyAll:
		if len(n.Allow) > 0 {
			return nil, fmt.Errorf("network.allow: deny_all takes no allow tuples (%d given): use mode allow_exact or drop the list", len(n.Allow))
		}
	case spec.NetworkAllowExact:
		if len(n.Allow) == 0 {
			return nil, fmt.Errorf("network.allow: allow_exact needs at least one tuple: list them or use mode deny_all")
		}
		p.Allow = make([]Tuple, 0, len(n.Allow))
		for i, r := range n.Allow {
			t, err := parseRule(r)
			if err != nil {
				return nil, fmt.Errorf("network.allow[%d]: %w", i, err)
			}
			p.Allow = append(p.Allow, t)
		}
	default:
		return nil, fmt.Errorf("network.mode: %q is not %q or %q", n.Mode, spec.NetworkDenyAll, spec.NetworkAllowExact)
	}
	p.Allow = sortTuples(p.Allow)
	serve, err := parseServe(n.Serve)
	if err != nil {
		return nil, err
	}
	p.Serve = serve
	if p.needsND() {
		why := "the contract allows IPv6 destinations"
		if !p.HasIPv6() {
			why = "the contract serves ports and IPv6 peers must reach them"
		}
		p.Implicit = append(p.Implicit, "icmpv6 neighbor discovery (router solicit, neighbor solicit/advert, and neighbor solicit from :: for duplicate address detection) from the cgroup, because "+why)
	}
	if p.hasPorts() {
		p.Implicit = append(p.Implicit, "replies (conntrack reply direction) from an allowed address and port back to the peer, for flows the cgroup serves on an allowed tuple")
	}
	if len(p.Serve) > 0 {
		names := make([]string, len(p.Serve))
		for i, s := range p.Serve {
			names[i] = s.String()
		}
		p.Implicit = append(p.Implicit, "served ports ("+strings.Join(names, ", ")+"): replies (conntrack reply direction) of connections that arrived from any peer on one of these local ports, back to that peer; no connection the cgroup opens gains anything")
	}
	if scope == ScopeNetns && (p.Loopback || len(p.Allow) > 0 || len(p.Serve) > 0) {
		p.Implicit = append(p.Implicit, "netns scope: the namespace is the container's own, so what the contract allows (the items above) is accepted from any socket in it, not only the cgroup's (another cgroup, kernel sockets: resets, neighbor discovery, TIME_WAIT and SYN-ACK of allowed flows), counted as allowed_outside; everything else there is dropped")
	}
	return p, nil
}

// checkScope refuses scopes other than ScopeCgroup and ScopeNetns, the
// empty one included: a table is never built for a scope nobody chose.
func checkScope(s Scope) error {
	switch s {
	case ScopeCgroup, ScopeNetns:
		return nil
	}
	return fmt.Errorf("scope %q is not %q or %q: build plans with NewPlan or NewPlanScoped", s, ScopeCgroup, ScopeNetns)
}

// check is what every kernel operation verifies about a plan first.
func (p *Plan) check() error {
	if p == nil {
		return errors.New("nil plan")
	}
	return checkScope(p.Scope)
}

func parseRule(r spec.AllowRule) (Tuple, error) {
	if strings.Contains(r.IP, "/") {
		return Tuple{}, fmt.Errorf("ip %q: a CIDR is not an exact address: list single addresses", r.IP)
	}
	a, err := netip.ParseAddr(r.IP)
	if err != nil {
		return Tuple{}, fmt.Errorf("ip %q: not an IP address (host names are never resolved here): %w", r.IP, err)
	}
	if a.Zone() != "" {
		return Tuple{}, fmt.Errorf("ip %q: zoned addresses are not supported", r.IP)
	}
	// An IPv4-mapped IPv6 destination leaves as an IPv4 packet: match it
	// as the IPv4 address it is, exactly.
	a = a.Unmap()
	if a.IsUnspecified() {
		return Tuple{}, fmt.Errorf("ip %q: the unspecified address is not a destination", r.IP)
	}
	t := Tuple{Addr: a}
	switch r.Proto {
	case spec.ProtoTCP, spec.ProtoUDP:
		t.Proto = ProtoTCP
		if r.Proto == spec.ProtoUDP {
			t.Proto = ProtoUDP
		}
		if r.Port < 1 || r.Port > 65535 {
			return Tuple{}, fmt.Errorf("port %d: %s needs a port in 1..65535", r.Port, r.Proto)
		}
		t.Port = uint16(r.Port)
	case spec.ProtoICMP, spec.ProtoICMPv6:
		if r.Port != 0 {
			return Tuple{}, fmt.Errorf("port %d: %s has no ports: drop the port", r.Port, r.Proto)
		}
		if r.Proto == spec.ProtoICMP {
			if !a.Is4() {
				return Tuple{}, fmt.Errorf("proto icmp with IPv6 address %s: use icmpv6", a)
			}
			t.Proto = ProtoICMP
		} else {
			if !a.Is6() {
				return Tuple{}, fmt.Errorf("proto icmpv6 with IPv4 address %s: use icmp", a)
			}
			t.Proto = ProtoICMPv6
		}
	default:
		return Tuple{}, fmt.Errorf("proto %q: want tcp, udp, icmp or icmpv6", r.Proto)
	}
	return t, nil
}

// parseServe validates network.serve and returns its ports sorted
// (protocol, then port) without duplicates.
func parseServe(rs []spec.ServeRule) ([]ServePort, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	out := make([]ServePort, 0, len(rs))
	for i, r := range rs {
		var s ServePort
		switch r.Proto {
		case spec.ProtoTCP:
			s.Proto = ProtoTCP
		case spec.ProtoUDP:
			s.Proto = ProtoUDP
		default:
			return nil, fmt.Errorf("network.serve[%d]: proto %q cannot be served: use tcp or udp", i, r.Proto)
		}
		if r.Port < 1 || r.Port > 65535 {
			return nil, fmt.Errorf("network.serve[%d]: port %d: serving %s needs a port in 1..65535", i, r.Port, r.Proto)
		}
		s.Port = uint16(r.Port)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ServePort) int {
		return cmp.Or(cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Port, b.Port))
	})
	return slices.Compact(out), nil
}

// sortTuples sorts (IPv4 before IPv6, then address, protocol, port) and
// drops duplicates. It sorts pointer-free keys, not Tuples: netip.Addr holds
// a pointer, and moving 10,000 of them around under the GC's write barrier
// cost more than the rest of planning. An IPv4 tuple packs into one uint64.
func sortTuples(ts []Tuple) []Tuple {
	k4 := make([]uint64, 0, len(ts))
	type key6 struct {
		hi, lo uint64
		rest   uint32 // proto<<16 | port
	}
	var k6 []key6
	for _, t := range ts {
		rest := uint32(t.Proto)<<16 | uint32(t.Port)
		if t.Addr.Is4() {
			a := t.Addr.As4()
			k4 = append(k4, uint64(binary.BigEndian.Uint32(a[:]))<<24|uint64(rest))
			continue
		}
		a := t.Addr.As16()
		k6 = append(k6, key6{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:]), rest})
	}
	slices.Sort(k4)
	k4 = slices.Compact(k4)
	slices.SortFunc(k6, func(a, b key6) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		return cmp.Compare(a.rest, b.rest)
	})
	k6 = slices.Compact(k6)
	out := make([]Tuple, 0, len(k4)+len(k6))
	for _, k := range k4 {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], uint32(k>>24))
		out = append(out, Tuple{Addr: netip.AddrFrom4(a), Proto: uint8(k >> 16), Port: uint16(k)})
	}
	for _, k := range k6 {
		var a [16]byte
		binary.BigEndian.PutUint64(a[:8], k.hi)
		binary.BigEndian.PutUint64(a[8:], k.lo)
		out = append(out, Tuple{Addr: netip.AddrFrom16(a), Proto: uint8(k.rest >> 16), Port: uint16(k.rest)})
	}
	return out
}

// HasIPv6 reports whether any allowed destination is IPv6.
func (p *Plan) HasIPv6() bool {
	return slices.ContainsFunc(p.Allow, func(t Tuple) bool { return t.Addr.Is6() })
}

// needsND reports whether the table accepts icmpv6 neighbor discovery:
// IPv6 destinations need it, and so do served ports (an IPv6 peer must
// resolve the container's address, and the container the peer's).
func (p *Plan) needsND() bool { return p.HasIPv6() || len(p.Serve) > 0 }

func (p *Plan) hasPorts() bool {
	return slices.ContainsFunc(p.Allow, func(t Tuple) bool { return t.Port != 0 })
}

// TableName is the table an operation's policy lives in:
// gensee_<first 12 characters of the operation id>.
func TableName(opID string) string { return TablePrefix + short(opID) }

func short(opID string) string {
	if len(opID) > 12 {
		return opID[:12]
	}
	return opID
}

func checkOpID(opID string) error {
	if opID == "" {
		return fmt.Errorf("plan network: empty operation id")
	}
	if !validName(opID) {
		return fmt.Errorf("plan network: operation id %q: use only letters, digits, '-' and '_'", opID)
	}
	return nil
}

func validName(s string) bool {
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return s != ""
}

// checkTable refuses to act on tables this package does not own.
func checkTable(name string) error {
	rest, ok := strings.CutPrefix(name, TablePrefix)
	if !ok || len(rest) > 12 || !validName(rest) {
		return fmt.Errorf("table %q is not a gensee table (want %s<up to 12 of [A-Za-z0-9_-]>): refusing to touch it", name, TablePrefix)
	}
	return nil
}
