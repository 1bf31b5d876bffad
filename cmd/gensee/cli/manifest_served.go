package cli

import (
	"fmt"
	"strings"

	"github.com/gensee/gensee/spec"
)

// serveLine is the enforced side of network.serve: the ports whose
// inbound connections the table answers, and what it checks of them.
func serveLine(rs []spec.ServeRule) string {
	ports := make([]string, len(rs))
	for i, r := range rs {
		ports[i] = fmt.Sprintf("%d/%s", r.Port, safeText(r.Proto))
	}
	return strings.Join(ports, ", ") + " (replies to peers that connected; a peer whose source does not route back through its interface is dropped)"
}

// servedLines is the observed side: what the table counted for the served
// ports, or why it is unknown. Empty when the contract serves nothing.
func servedLines(n spec.NetworkEnforcement, o spec.Observed) []string {
	if len(n.Serve) == 0 && o.Served == nil {
		return nil
	}
	s := o.Served
	if s == nil {
		return []string{"not counted (the counters were not read)"}
	}
	lines := []string{fmt.Sprintf("%d reply packets / %d bytes, %d tcp connection(s) answered; %d inbound packet(s) with a forged source dropped (reverse path)",
		s.Packets, s.Bytes, s.Connections, s.ReversePathDropped)}
	for _, p := range s.Ports {
		lines = append(lines, fmt.Sprintf("%d/%s: %d packets / %d bytes", p.Port, safeText(p.Proto), p.Packets, p.Bytes))
	}
	if s.PortsWithheld != "" {
		lines = append(lines, "per port: withheld ("+safeText(s.PortsWithheld)+")")
	}
	return lines
}
