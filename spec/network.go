package spec

import (
	"fmt"
	"net/netip"
	"strings"
)

// check validates the network section; paths are relative to the contract.
func (n *Network) check(p problems) {
	switch n.Mode {
	case NetworkDenyAll:
		if len(n.Allow) > 0 {
			p.add("network.allow", `is only allowed with mode "allow_exact"; deny_all allows nothing`)
		}
	case NetworkAllowExact:
		if len(n.Allow) == 0 {
			p.add("network.allow", `allow_exact needs at least one tuple; use mode "deny_all" to allow nothing`)
		}
	case "":
		p.add("network.mode", `is required: "deny_all" or "allow_exact"`)
	default:
		p.addf("network.mode", `%q is not a network mode: use "deny_all" or "allow_exact"`, truncate(n.Mode, 80))
	}
	switch n.Loopback {
	case "", LoopbackDeny, LoopbackAllow:
	default:
		p.addf("network.loopback", `%q is not a loopback policy: use "deny" (the default) or "allow"`, truncate(n.Loopback, 80))
	}
	n.checkServe(p)
	if len(n.Allow) > maxAllow {
		p.addf("network.allow", "has %d tuples, at most %d allowed", len(n.Allow), maxAllow)
		return
	}
	seen := map[string]int{}
	for i, r := range n.Allow {
		path := joinIndex("network.allow", i)
		addr, ok := r.check(p.at(path))
		if !ok {
			continue
		}
		key := fmt.Sprintf("%s/%s/%d", addr, r.Proto, r.Port)
		if j, dup := seen[key]; dup {
			p.addf(path, "duplicates network.allow[%d]", j)
			continue
		}
		seen[key] = i
	}
}

// check validates one tuple and returns its address when it is valid.
func (r *AllowRule) check(p problems) (netip.Addr, bool) {
	before := len(*p.list)
	addr, msg := parseAllowIP(r.IP)
	if msg != "" {
		p.add("ip", msg)
	}
	switch r.Proto {
	case ProtoTCP, ProtoUDP:
		if r.Port == 0 {
			p.addf("port", "is required for %s: a single port 1-65535", r.Proto)
		} else if r.Port < 1 || r.Port > 65535 {
			p.addf("port", "%d is out of range 1-65535", r.Port)
		}
	case ProtoICMP, ProtoICMPv6:
		if r.Port != 0 {
			p.addf("port", "must be absent for %s: ICMP has no ports", r.Proto)
		}
		if msg == "" && r.Proto == ProtoICMP && !addr.Is4() {
			p.addf("proto", `"icmp" is for IPv4 addresses; use "icmpv6" for %s`, addr)
		}
		if msg == "" && r.Proto == ProtoICMPv6 && !addr.Is6() {
			p.addf("proto", `"icmpv6" is for IPv6 addresses; use "icmp" for %s`, addr)
		}
	case "":
		p.add("proto", `is required: "tcp", "udp", "icmp" or "icmpv6"`)
	default:
		p.addf("proto", `%q is not a protocol: use "tcp", "udp", "icmp" or "icmpv6"`, truncate(r.Proto, 80))
	}
	return addr, len(*p.list) == before
}

// parseAllowIP accepts exactly one IPv4 or IPv6 address literal and, for
// anything else, says what it looks like so the operator can fix it.
func parseAllowIP(s string) (netip.Addr, string) {
	q := fmt.Sprintf("%q", truncate(s, 80))
	if s == "" {
		return netip.Addr{}, "is required: a single IPv4 or IPv6 address"
	}
	if a, err := netip.ParseAddr(s); err == nil {
		switch {
		case a.Zone() != "":
			return a, q + " has a zone; allow_exact takes plain IP addresses"
		case a.Is4In6():
			return a, fmt.Sprintf("%s is an IPv4-mapped IPv6 address; write the IPv4 address %q", q, a.Unmap().String())
		case a.IsUnspecified():
			return a, q + " is the unspecified address, not a destination"
		}
		return a, ""
	}
	if pfx, err := netip.ParsePrefix(s); err == nil {
		if pfx.IsSingleIP() {
			return netip.Addr{}, fmt.Sprintf("%s is a CIDR; allow_exact takes single IP addresses only (write %q)", q, pfx.Addr().String())
		}
		return netip.Addr{}, q + " is a CIDR; allow_exact takes single IP addresses only, never a range"
	}
	if strings.Contains(s, "/") {
		return netip.Addr{}, q + " is not an IP address (a CIDR? allow_exact takes single IP addresses only)"
	}
	if _, err := netip.ParseAddrPort(s); err == nil {
		return netip.Addr{}, q + ` includes a port; write the address alone and the port in "port"`
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		_, e1 := netip.ParseAddr(strings.TrimSpace(lo))
		_, e2 := netip.ParseAddr(strings.TrimSpace(hi))
		if e1 == nil && e2 == nil {
			return netip.Addr{}, q + " is an address range; allow_exact takes single IP addresses only"
		}
	}
	if isHostname(s) {
		return netip.Addr{}, q + " is a hostname; allow_exact takes IP addresses only"
	}
	return netip.Addr{}, q + " is not an IP address; allow_exact takes a single IPv4 or IPv6 address"
}

// isHostname reports whether s is shaped like a DNS name with at least one
// letter (so "10.0.0.256" is a bad address, not a hostname).
func isHostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 || !strings.ContainsFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }) {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// maxServe bounds network.serve.
const maxServe = 64

// checkServe validates network.serve: tcp or udp, one port each, unique.
func (n *Network) checkServe(p problems) {
	if len(n.Serve) > maxServe {
		p.addf("network.serve", "has %d ports, at most %d allowed", len(n.Serve), maxServe)
		return
	}
	seen := map[string]int{}
	for i, r := range n.Serve {
		path := joinIndex("network.serve", i)
		switch r.Proto {
		case ProtoTCP, ProtoUDP:
		case "":
			p.add(path+".proto", `is required: "tcp" or "udp"`)
			continue
		default:
			p.addf(path+".proto", `%q cannot be served: use "tcp" or "udp"`, truncate(r.Proto, 80))
			continue
		}
		if r.Port < 1 || r.Port > 65535 {
			p.addf(path+".port", "%d is not a port: a single port 1-65535", r.Port)
			continue
		}
		key := fmt.Sprintf("%s/%d", r.Proto, r.Port)
		if j, dup := seen[key]; dup {
			p.addf(path, "duplicates network.serve[%d]", j)
			continue
		}
		seen[key] = i
	}
}
