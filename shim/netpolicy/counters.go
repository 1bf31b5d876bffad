package netpolicy

import (
	"context"
	"fmt"
)

// Count is a packet and byte count.
type Count struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// TupleCount is what one allowed tuple's element of its used set counted
// (zero for a tuple the rules never matched).
type TupleCount struct {
	Tuple Tuple
	Count
}

// ServeCount is what one served port's element of serve_used counted: the replies
// of its served connections, SYN-ACKs included.
type ServeCount struct {
	Port  ServePort
	Count Count
}

// Counters are the table's counters. Allowed counts every packet of the
// cgroup the table accepted (tuples, replies, loopback, neighbor discovery);
// Denied every packet a process of the cgroup sent that it dropped;
// DeniedKernel the dropped packets of the cgroup's sockets no process owns
// (kernel replies from control sockets created in the cgroup, closed
// sockets). In netns scope, AllowedOutside and DeniedOutside count the
// packets no cgroup rule decided — another cgroup's, kernel sockets'
// (resets, ICMP errors, TIME_WAIT and SYN-ACK), no socket — accepted because
// the contract allows them, or dropped; both stay zero in cgroup scope. They
// are authoritative; NFLOG events are rate-limited samples of Denied (prefix
// Plan.LogPrefix) and DeniedOutside (Plan.LogPrefixOutside).
//
// Spoofed counts the packets dropped, before any accept, because their
// source address is not an address of the namespace (a socket bound with
// IPV6_FREEBIND, IP_TRANSPARENT or ip_nonlocal_bind, a raw socket): in
// either scope the cgroup's, in netns scope every other packet's too. Each
// is also counted where its sender puts it — Denied (a process of the
// cgroup), DeniedKernel (the cgroup's kernel sockets: multicast listener
// reports from ::, sent while no link-local address is usable) or
// DeniedOutside — so those keep counting every packet the table dropped.
// In cgroup scope a packet no cgroup rule attributes is not checked: the
// shared namespace's other tenants (a transparent proxy) may own such
// sources. A duplicate address detection probe (neighbor solicitation
// from ::) is accepted, counted in Allowed or AllowedOutside, where the
// table accepts neighbor discovery; elsewhere it is spoofed like any other.
//
// With served ports (Plan.Serve), Served counts the replies of connections
// that arrived on one, which the table accepted (never counted in Allowed
// or AllowedOutside), and ServedConnections the SYN-ACKs among them: one
// per TCP connection answered, retransmissions included. In cgroup scope a
// SYN-ACK has no full socket, so no cgroup: policy accept lets it pass and
// a count-only rule counts it in Served and ServedConnections when it
// leaves a served port on a flow whose SYN reached a listener of the
// cgroup (the serve label).
// ServeCounts is per port, the element counters of serve_used; their
// sum is at most Served (a count the kernel could not add is lost).
type Counters struct {
	Allowed      Count
	Denied       Count
	DeniedKernel Count
	Spoofed      Count // also counted in Denied, DeniedKernel or DeniedOutside
	// SourceRouted counts the packets dropped, before any accept, because
	// they carry an IPv4 loose or strict source route option or an IPv6
	// routing header: their destination address is only the first hop.
	// The cgroup's in either scope, in netns scope every other packet's
	// too; each is also counted in Denied, DeniedKernel or DeniedOutside.
	SourceRouted      Count
	AllowedOutside    Count        // netns scope only
	DeniedOutside     Count        // netns scope only
	Tuples            []TupleCount // per allow tuple, grouped by set (v4, v6, icmp, icmpv6)
	Served            Count        // with served ports only
	ServedConnections uint64       // SYN-ACKs sent from served ports (served_conn packets)
	ServeCounts       []ServeCount // per served port, in Plan.Serve order
	// ServedSpoofed counts the inbound packets to a served port the input
	// chain dropped: their source would not be routed back out of the
	// interface they came in on (reverse path), or came over lo from an
	// address that is not the namespace's. Not part of Denied: they are
	// the peer's packets, not the workload's.
	ServedSpoofed Count
	// ElementsWithheld says why Tuples and ServeCounts are left out: the
	// per-element counts exceed the named counters that counted the same
	// packets, which happens only when those were reset (nft reset
	// counters) or elements were written from outside the table's rules.
	// The named counters are still read.
	ElementsWithheld string
}

// ReadCounters reads plan p's counters from the namespace netnsFD refers to.
func ReadCounters(ctx context.Context, netnsFD int, p *Plan) (Counters, error) {
	e, err := newEngine(netnsFD)
	if err != nil {
		return Counters{}, fmt.Errorf("read counters of table %s: %w", tableOf(p), err)
	}
	return e.counters(ctx, p)
}

func (e engine) counters(ctx context.Context, p *Plan) (Counters, error) {
	if err := p.check(); err != nil {
		return Counters{}, fmt.Errorf("read counters of table %s: %w", tableOf(p), err)
	}
	if err := ctx.Err(); err != nil {
		return Counters{}, fmt.Errorf("read counters of table %s: %w", p.Table, err)
	}
	// Only what holds counters is read: the exit path reads them right
	// before the table goes, and a read-back already compared the rest.
	want := build(p)
	var sets []string
	for _, s := range want.sets {
		if s.counted() {
			sets = append(sets, s.set.Name)
		}
	}
	got, err := e.k.dumpCounters(p.Table, sets)
	if err != nil {
		return Counters{}, fmt.Errorf("read counters of table %s: %w", p.Table, err)
	}
	return countersOf(want, got)
}

// countersOf extracts counters from a dump, naming tuples by the plan.
func countersOf(want, got *ruleset) (Counters, error) {
	var c Counters
	var conn Count
	dst := map[string]*Count{
		counterAllow: &c.Allowed, counterDeny: &c.Denied, counterDenyK: &c.DeniedKernel, counterSpoofed: &c.Spoofed, counterSourceRouted: &c.SourceRouted,
		counterAllowO: &c.AllowedOutside, counterDenyO: &c.DeniedOutside,
		counterServed: &c.Served, counterServedConn: &conn, counterServedSpoofed: &c.ServedSpoofed,
	}
	seen := map[string]bool{}
	for _, o := range got.counters {
		if d := dst[o.Name]; d != nil {
			*d = Count{Packets: o.Packets, Bytes: o.Bytes}
			seen[o.Name] = true
		}
	}
	for _, w := range want.counters {
		if !seen[w.Name] {
			return Counters{}, fmt.Errorf("table %s lacks its counter %q", want.table.Name, w.Name)
		}
	}
	gotSets := map[string]*setElems{}
	for _, s := range got.sets {
		gotSets[s.set.Name] = s
	}
	c.ServedConnections = conn.Packets
	for _, w := range want.sets {
		if !w.counted() {
			continue
		}
		// A key the rules never added was never matched: zero.
		byKey := map[string]Count{}
		if g := gotSets[w.set.Name]; g != nil {
			for _, e := range g.elems {
				if e.Counter != nil {
					byKey[string(e.Key)] = Count{Packets: e.Counter.Packets, Bytes: e.Counter.Bytes}
				}
			}
		}
		in := w.countsFor
		for i, t := range in.tuples {
			c.Tuples = append(c.Tuples, TupleCount{Tuple: t, Count: byKey[string(in.elems[i].Key)]})
		}
		for i, sp := range in.ports {
			c.ServeCounts = append(c.ServeCounts, ServeCount{Port: sp, Count: byKey[string(in.elems[i].Key)]})
		}
	}
	// Every packet a used set counts is counted by a named counter too
	// (allowed or allowed_outside for tuples, served for ports), and the
	// elements are read before the objects: more in the elements than in
	// the objects means the objects were reset or the elements written
	// from outside the rules. Then no per-element count is reported; the
	// named counters still are. (A forged count that stays under them is
	// not told apart from a real one.)
	var tuples, ports Count
	for _, t := range c.Tuples {
		tuples.add(t.Count)
	}
	for _, p := range c.ServeCounts {
		ports.add(p.Count)
	}
	allowed := c.Allowed
	allowed.add(c.AllowedOutside)
	switch {
	case tuples.exceeds(allowed):
		c.ElementsWithheld = fmt.Sprintf("the per-tuple counts (%d packets, %d bytes) exceed allowed and allowed_outside (%d packets, %d bytes), which counted the same packets: the table's counters were reset or its elements written from outside its rules", tuples.Packets, tuples.Bytes, allowed.Packets, allowed.Bytes)
	case ports.exceeds(c.Served):
		c.ElementsWithheld = fmt.Sprintf("the per-port counts (%d packets, %d bytes) exceed served (%d packets, %d bytes), which counted the same replies: the table's counters were reset or its elements written from outside its rules", ports.Packets, ports.Bytes, c.Served.Packets, c.Served.Bytes)
	}
	if c.ElementsWithheld != "" {
		c.Tuples, c.ServeCounts = nil, nil
	}
	return c, nil
}

func (c *Count) add(o Count) {
	c.Packets += o.Packets
	c.Bytes += o.Bytes
}

// exceeds: c counts more packets or more bytes than o.
func (c Count) exceeds(o Count) bool { return c.Packets > o.Packets || c.Bytes > o.Bytes }
