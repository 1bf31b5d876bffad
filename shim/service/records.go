package service

import (
	"time"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// admissionRecord is admission.json: why this contract governs this
// container, and who the container is.
type admissionRecord struct {
	OperationID string      `json:"operation_id"`
	Namespace   string      `json:"namespace"`
	ContainerID string      `json:"container_id"`
	CreatedAt   time.Time   `json:"created_at"`
	Facts       factsRecord `json:"facts"`
	admission.Recorded
	CapabilitiesRemoved []string                 `json:"capabilities_removed"`
	Seccomp             *spec.SeccompEnforcement `json:"seccomp,omitempty"`
	Notes               []string                 `json:"notes,omitempty"` // recorded, not refused (e.g. an unconfined LSM profile)
	Netns               string                   `json:"netns"`
	UserNamespace       bool                     `json:"user_namespace,omitempty"`
	NetnsPath           string                   `json:"netns_path,omitempty"`
	Table               string                   `json:"table,omitempty"`
	Subject             *subject                 `json:"subject,omitempty"`
	Deadline            string                   `json:"deadline,omitempty"`
}

// subject identifies the container's init beyond pid reuse.
type subject struct {
	InitPID    int    `json:"init_pid"`
	StartTime  uint64 `json:"start_time"` // field 22 of /proc/<pid>/stat, clock ticks since boot
	CgroupPath string `json:"cgroup_path"`
	CgroupID   uint64 `json:"cgroup_id"`
}

// refusal is one line of the refusals log.
type refusal struct {
	At          time.Time `json:"at"`
	Namespace   string    `json:"namespace"`
	ContainerID string    `json:"container_id"`
	Reason      string    `json:"reason"`
	Message     string    `json:"message"`
}

// factsRecord is the trusted facts admission matched selectors against.
type factsRecord struct {
	ContainerdNamespace string `json:"containerd_namespace"`
	Runtime             string `json:"runtime"`
	K8sNamespace        string `json:"k8s_namespace,omitempty"`
}

func recordFacts(f admission.Facts) factsRecord {
	return factsRecord{ContainerdNamespace: f.ContainerdNamespace, Runtime: f.Runtime, K8sNamespace: f.K8sNamespace}
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
