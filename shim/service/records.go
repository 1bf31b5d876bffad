package service

import (
	"time"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// refusal is one line of the refusals log.
type refusal struct {
	At          time.Time `json:"at"`
	Namespace   string    `json:"namespace"`
	ContainerID string    `json:"container_id"`
	Reason      string    `json:"reason"`
	Message     string    `json:"message"`
}

// recordFacts is the trusted facts admission matched selectors against,
// as admission.json records them.
func recordFacts(f admission.Facts) spec.AdmissionFacts {
	return spec.AdmissionFacts{ContainerdNamespace: f.ContainerdNamespace, Runtime: f.Runtime, K8sNamespace: f.K8sNamespace}
}

// countersRecord is what the table counted, as recorded.
type countersRecord struct {
	Allowed      netpolicy.Count `json:"allowed"`
	Denied       netpolicy.Count `json:"denied"`
	DeniedKernel netpolicy.Count `json:"denied_kernel"`
	// Outside the bound cgroup, in the container's own netns (netns scope).
	AllowedOutside netpolicy.Count `json:"allowed_outside"`
	DeniedOutside  netpolicy.Count `json:"denied_outside"`
	// Of the denied ones, packets with a source address not the netns's own.
	Spoofed netpolicy.Count `json:"spoofed"`
	// Replies of connections that arrived on a network.serve port.
	Served            netpolicy.Count        `json:"served"`
	ServedConnections uint64                 `json:"served_connections"`
	ServeCounts       []netpolicy.ServeCount `json:"serve_counts,omitempty"`
	Tuples            []tupleCount           `json:"tuples,omitempty"`
}

type tupleCount struct {
	Tuple string `json:"tuple"`
	netpolicy.Count
}

func recordCounters(c netpolicy.Counters) *countersRecord {
	r := &countersRecord{Allowed: c.Allowed, Denied: c.Denied, DeniedKernel: c.DeniedKernel,
		AllowedOutside: c.AllowedOutside, DeniedOutside: c.DeniedOutside, Spoofed: c.Spoofed,
		Served: c.Served, ServedConnections: c.ServedConnections, ServeCounts: c.ServeCounts}
	for _, t := range c.Tuples {
		r.Tuples = append(r.Tuples, tupleCount{Tuple: t.Tuple.String(), Count: t.Count})
	}
	return r
}
