// Package netpolicy owns a container's network authority: it turns the
// network section of an admitted contract into a Plan (pure, validated, no
// side effects), installs that plan as one nftables table in the network
// namespace where the container's sockets live (one netlink batch), reads the
// table back and compares it to the plan, reads its counters, and removes it.
// Probe answers, for any front door, whether this host can enforce a
// network section at all (the cgroup2 mount, nf_tables with `socket
// cgroupv2`, NFLOG, and the runtime's own table for it, installed, read back
// and removed in a throwaway network namespace).
//
// The table, `inet gensee_<first 12 characters of the operation id>`:
//
//	counter allowed, denied, denied_kernel, spoofed, source_routed
//	counter allowed_outside, denied_outside                          netns scope only
//	counter served, served_conn, served_spoofed                       with served ports only
//	set cg      { type cgroupsv2 }                                  the container's cgroup id
//	set allow4  { type ipv4_addr . inet_proto . inet_service }       tcp/udp tuples
//	set allow6  { type ipv6_addr . inet_proto . inet_service }
//	set icmp4, icmp6 { type ipv4_addr / ipv6_addr }                  icmp destinations (no ports)
//	set serve   { type inet_proto . inet_service }                   network.serve: local ports
//	set allow4_used, allow6_used, icmp4_used, icmp6_used, serve_used
//	            { same type and size; flags dynamic }                the keys matched, counted
//	set nd6     { type icmpv6_type }                                 only with IPv6 tuples or served ports
//	chain input { type filter hook input priority filter; policy accept;   with served ports only
//	  C' iif != lo meta l4proto . th dport @serve fib saddr . iif oif missing → served_spoofed, drop
//	  C' iif lo meta l4proto . th dport @serve fib saddr type != local        → served_spoofed, drop
//	  C' meta l4proto . th dport @serve ct label set 26                        (the flow may be answered) }
//	  (C' is C in cgroup scope, nothing in netns scope)
//	chain output { type filter hook output priority filter; policy accept (cgroup scope) | drop (netns scope);
//	  C ct direction original ct label set 27      (the container opened the flow; both scopes)
//	  N(C, allowed)
//	  C fib saddr type != local meta skuid >= 0 limit 20/s log group 2604 prefix "gensee deny <op> "
//	  C fib saddr type != local meta skuid >= 0   → spoofed, denied, drop
//	  C fib saddr type != local                   → spoofed, denied_kernel, drop
//	  C R meta skuid >= 0                          → source_routed, denied, drop
//	  C R                                          → source_routed, denied_kernel, drop
//	  A(C, allowed)
//	  C meta skuid >= 0 limit 20/s log group 2604 prefix "gensee deny <op> "
//	  C meta skuid >= 0                            → denied, drop
//	  C                                            → denied_kernel, drop
//	  cgroup scope, with served ports:
//	  S(-)                                          → served, served_conn  (count only)
//	  netns scope only:
//	  N(-, allowed_outside)
//	  fib saddr type != local limit 20/s log group 2604 prefix "gensee outside <op> "
//	  fib saddr type != local                     → spoofed, denied_outside, drop
//	  R                                           → source_routed, denied_outside, drop
//	  A(-, allowed_outside)
//	    limit 20/s log group 2604 prefix "gensee outside <op> "
//	                                               → denied_outside, drop }
//	where C is `socket cgroupv2 level N @cg`, R each of `meta nfproto ipv4 ip
//	  option lsrr exists`, `meta nfproto ipv4 ip option ssrr exists` and
//	  `meta nfproto ipv6 exthdr rt exists` (one rule each), N(M, counter), only with nd6,
//	  M ip6 saddr :: icmpv6 type nd-neighbor-solicit → accept (duplicate address detection)
//	and A(M, counter) the accepts,
//	each starting with M (nothing for "-") and counting in counter,
//	where every rule matching a set X comes after its twin that only
//	adds the key to X_used (`M … @X add @X_used { key counter }`, left out below):
//	  M ct direction reply ct label 26 tcp flags & (syn|ack) == syn|ack meta l4proto . th sport @serve
//	                                              → served, served_conn, accept
//	  M ct direction reply ct label 26 meta l4proto . th sport @serve → served, accept
//	  (these two are S(M), only with served ports; never counted in counter)
//	  M oif lo                                    → accept   (loopback: allow)
//	  M ip daddr . meta l4proto . th dport @allow4 → accept
//	  M ct direction reply ip saddr . meta l4proto . th sport @allow4 → accept
//	  (the same for ip6 / allow6)
//	  M meta l4proto icmp ip daddr @icmp4          → accept   (and icmpv6)
//	  M icmpv6 type @nd6                           → accept
//
// Two scopes (Plan.Scope). ScopeCgroup, for a namespace the container
// shares (the host's, a pod's): the table filters only sockets of the
// container's cgroup v2 subtree, so other cgroups sharing the namespace are
// untouched (policy accept). Rules are positive matches followed by explicit
// drops. The kernel answers NFT_BREAK (rule skipped) for a packet whose
// socket it cannot attribute — no socket, not a full socket (TIME_WAIT, a
// SYN-ACK's request socket), another namespace's, or a cgroup shallower than
// N — so such a packet can match no cgroup rule at all: never an accept, and
// never a drop either, which is why policy must never be expressed as `!=` on
// the cgroup match. `meta skuid >= 0` holds for every socket a process owns
// and breaks for kernel sockets; it only splits the drop count.
//
// ScopeNetns, for a namespace only the container uses (runc made it), fails
// closed: the cgroup's rules run first and unchanged, so "denied" and its log
// still mean attempts by the workload's cgroup; every packet they did not
// decide — a process that left the cgroup, kernel sockets, packets without a
// full socket — meets the same accepts without the cgroup match (the same
// sets, looked up twice, so per-tuple counters see both), then its own
// rate-limited log rule (prefix "gensee outside <op> ", same group; kernel
// packets carry no NFULA_UID) and a drop counted in denied_outside. Policy
// drop as well, checked on read-back: a flushed chain still drops.
//
// Served ports (Plan.Serve, the contract's network.serve) are inbound
// service, not outbound authority: the table accepts what the container
// sends in the conntrack reply direction from a served local port, i.e. the
// answers on connections (and UDP flows) a peer opened to that port; a peer
// may be anyone that reaches the port. A connection the container opens is
// in the original direction whatever its source port, so serving a port
// lets nothing out that the contract does not allow (its first packet is
// dropped, and a dropped packet never confirms a conntrack entry). Inbound
// packets reach a listener on any port; the input chain only checks the
// sources of packets to served ports and labels their flows (see below),
// and only the answers are filtered. A SYN-ACK leaves from a request socket,
// which has no cgroup: in netns scope the outside copy of S decides it (a
// port not served gets no SYN-ACK at all); in cgroup scope it passes, as
// every unattributed packet does, so a client of a port not served
// completes its handshake and then gets no data; the count-only S(-) at the
// end counts the SYN-ACKs sent from served ports on flows whose SYN reached
// a listener of the cgroup (the label).
//
// Forged peers of served ports. A UDP datagram (or a SYN) from a forged
// source D to a served port creates a conntrack entry, and the serve accept
// then lets the workload answer D, which never contacted it. The input
// chain drops, before conntrack confirms the entry, every packet to a
// served port whose source the namespace would not route back out of the
// interface it arrived on (strict reverse path, RFC 3704; IPv4 and IPv6),
// and over lo every one whose source is not an address of the namespace;
// counted in served_spoofed, not in denied (they are the peer's packets).
// It cannot tell a forged source that routes back through the arrival
// interface (any address behind the default route) from a genuine one:
// that peer is answered, and if the workload was denied that peer earlier
// the flow sensor reports a deny_then_reach. In cgroup scope only packets
// whose socket is the cgroup's are checked.
//
// So the serve accepts require that check to have happened: the input
// chain's last rule sets conntrack label bit 26 (serveLabel) on the flow of
// every packet to a served port that the drops let through, in cgroup scope
// only when its socket is the cgroup's, and S matches only flows carrying
// it. Without it, in cgroup scope, a datagram forged from D that arrived
// before the workload bound the port (no socket: the cgroup's rules skip
// it) created an entry, and the workload, once bound, "answered" D on it: a
// peer the contract never allowed, with no reverse-path drop counted. Such
// an entry stays unlabelled and the workload's packets on it meet the deny
// rules; a genuine peer that sent before the bind is answered once its
// next packet, to the cgroup's socket, passes the check and labels the
// flow (TCP: the SYN to the cgroup's listener). A label, not a ct mark:
// other software sets whole ct marks, while the kernel only ORs label bits
// in. An entry created while no rule of the namespace used labels (before
// the first served table here) has no room for them: it is never answered
// until it expires; netns scope flushes conntrack at install anyway. The
// label also holds where a drop comes too late: a forged datagram over lo
// (another tenant of a shared namespace) has its conntrack entry confirmed
// at output, before the input chain drops it, and only the missing label
// keeps the workload from answering it.
//
// The container's own flows. The output chain's first rule, before any
// rule that drops or accepts, sets conntrack label bit 27 (ownLabel) on
// every packet a socket of the cgroup sends in a flow's original
// direction: a flow the table then accepts is confirmed labelled, and a
// dropped first packet never confirms its entry. The flow sensor
// (shim/watchdog/evidence.FlowPoller) reads it. In cgroup scope only a
// flow carrying it reached a target for the container: a connection
// another tenant of the shared namespace (the host, the pod) made to a
// target the container was denied, or a stale entry older than the table,
// is not the container's. A flow a peer opened never has its original
// direction through the output chain, so a served flow carries it only
// when the container connected to its own served port; the sensor counts
// a watched target as answered on a served port only with the serve label
// and without this one. The rule is the same in netns scope, where the
// sensor takes every flow of the namespace for the container's and reads
// the label only for that. A packet the cgroup sends on a flow another
// socket already confirmed (a raw socket, or a UDP socket sharing the
// tuple) labels that flow even when the packet is then dropped: only the
// container can do that, to its own evidence.
//
// Non-local sources. The reply and serve accepts trust a packet's source
// address and port, and a socket bound with IPV6_FREEBIND (no privilege
// needed), ip_nonlocal_bind, IP_TRANSPARENT or a raw socket sends from any
// source: bound to R it opens a flow R → A to an allowed A:53, then bound to
// A:53 it "replies" to R; or it sends from R to its own served port over lo
// and answers R as a served peer. So before any accept, a packet whose
// source is not an address of the namespace (`fib saddr type != local`:
// loopback and link-local addresses are local; ::, 0.0.0.0, broadcast,
// multicast and foreign addresses are not) is dropped and counted in
// spoofed, and in denied, denied_kernel or denied_outside by its sender.
// The one exemption is a duplicate address detection probe (neighbor
// solicitation from ::), where the table accepts neighbor discovery. In
// cgroup scope only the cgroup's packets are checked; a packet no cgroup
// rule attributes passes by policy as before (another tenant's transparent
// proxy may own such sources), and no accept there trusts its source. In
// netns scope the outside copy runs before the outside accepts, so a
// SYN-ACK or TIME_WAIT answer from a foreign address is dropped too. A
// dropped packet confirms no conntrack entry, so the spoofed first step
// leaves no flow to reply on.
//
// Source routes. A workload sets an IPv4 loose or strict source route
// option (IP_OPTIONS) or an IPv6 routing header (IPV6_RTHDR, type 2 or 4)
// without any capability; the kernel then addresses the packet to the
// route's first hop, and the final destination travels in the header. The
// table matches destination addresses, so it would see only that hop: an
// allowed tuple relays to anywhere (if it forwards source-routed packets).
// Every packet carrying one is dropped before any accept, counted in
// source_routed and, by sender, in denied, denied_kernel or denied_outside;
// not logged (the only destination a record could name is the first hop).
// These are all the headers that route a packet past its destination
// address (RFC 791 §3.1, RFC 8200 §4.4); the other IPv4 options (record
// route, timestamp) do not change the path.
//
// Per-tuple counts. A counted set (allow4, allow6, icmp4, icmp6, serve)
// holds no counters of its own. Each rule that matches it follows a twin
// rule ("gensee: count per element, …") with the same match that adds the
// matched key to the set's used set with a counter, and decides nothing.
// The kernel allocates an element counter only for a key some packet
// matched, instead of for every planned element at install: for 10,000
// tuples that was most of the install's time and half of what the
// read-back reads. Should the kernel fail to add an element (out of
// memory, or two CPUs racing to add the same new key to a nearly full
// set), the twin rule ends and only the count is lost: the packet meets
// its rule as before. The counter is the add's, not the used set's: the
// kernel dumps an add's expressions only for a set that has none, so
// read-back sees that it starts at zero. Read-back checks each used set's
// declaration (dynamic, no expression, key, size), that the add carries
// one counter at zero, and that every element the used set holds is a
// key of its set carrying a counter and nothing else; elements of the
// other sets must carry nothing at all (a quota or limit on an element
// would end every rule that matches it once spent). The counters read at
// exit are the used sets' elements, read before the named counters: a key
// never matched counts zero, and per-element counts above allowed and
// allowed_outside (tuples) or served (ports), which counted the same
// packets, are withheld with the reason (Counters.ElementsWithheld: the
// named counters were reset, or elements written from outside the rules);
// the named counters are still reported. A count written from outside
// that stays under them is not told apart.
//
// It never touches a table whose name does not start with "gensee_", never
// resolves host names, never widens or narrows a contract's tuples, and never
// flushes conntrack in the caller's own (host) namespace. Netlink calls are
// not interruptible; ctx is checked between steps.
package netpolicy
