package specpolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// checkSysctls admits network-namespaced sysctls and kernel.shm_rmid_forced (the one
// non-net key of PSS baseline's safe set; it is ipc-namespaced). Why net.* is safe: in a
// private netns only the netns's own keys exist under /proc/sys/net (the global ones,
// e.g. net.core.wmem_max, are registered on init_net only), so the kernel refuses them;
// in the host netns every net.* key is the host's, so net.* needs a network namespace.
// Refused even so:
//   - net.core.bpf_*: BPF JIT knobs, host-global; named so no kernel change can expose them.
//   - net.netfilter.* and net.nf_conntrack_max: conntrack tuning (tcp_loose, be_liberal,
//     helpers) changes how the boundary table's ct state classifies packets.
//
// Keys must be dotted words: runc turns dots into slashes under /proc/sys, so "/" or an
// empty component ("..") could name a path outside the key's subtree.
func checkSysctls(s *specs.Spec) error {
	if s.Linux == nil {
		return nil
	}
	keys := make([]string, 0, len(s.Linux.Sysctl))
	for k := range s.Linux.Sysctl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	privateNet := hasNS(s.Linux.Namespaces, specs.NetworkNamespace)
	for _, k := range keys {
		field := fmt.Sprintf("linux.sysctl[%q]", k)
		why := sysctlRefusal(k, privateNet)
		if why == "" {
			continue
		}
		return refuse(RuleSysctl, field, "the spec sets sysctl %s, which %s; remove it (only network-namespaced net.* keys and kernel.shm_rmid_forced are admitted)", k, why)
	}
	return nil
}

func sysctlRefusal(k string, privateNet bool) string {
	if !wellFormedKey(k) {
		return "is not a dotted sysctl name"
	}
	switch {
	case k == "kernel.shm_rmid_forced":
		return ""
	case !strings.HasPrefix(k, "net."):
		return "is not network-namespaced"
	case strings.HasPrefix(k, "net.core.bpf_"):
		return "tunes the host-global BPF JIT"
	case strings.HasPrefix(k, "net.netfilter."), slices.Contains([]string{"net.nf_conntrack_max"}, k):
		return "changes how conntrack classifies the boundary table's packets"
	case boundaryNetSysctl(k):
		return "changes which source addresses or forwarded paths the namespace's packets may take, which the boundary table's rules assume"
	case !privateNet:
		return "would change the host's network stack (the spec has no network namespace)"
	}
	return ""
}

// boundaryNetSysctl reports whether k is a net.* sysctl the table's rules
// depend on: binding a non-local source address (which would let a socket
// pose as an allowed peer's reply), routing loopback addresses off the
// host, accepting local sources from outside, or forwarding.
func boundaryNetSysctl(k string) bool {
	last := k[strings.LastIndexByte(k, '.')+1:]
	switch last {
	case "ip_nonlocal_bind", "route_localnet", "accept_local", "forwarding", "ip_forward", "proxy_arp", "proxy_ndp":
		return true
	}
	return false
}

func wellFormedKey(k string) bool {
	for _, c := range strings.Split(k, ".") {
		if c == "" {
			return false
		}
		for _, r := range c {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return false
			}
		}
	}
	return true
}
