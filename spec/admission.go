package spec

import "time"

// Admission is admission.json, written into an operation's records before
// anything of the workload runs: why a contract governs the operation, and
// who it governs. Every front door writes it — the shim (containers), OCI
// hooks and host runs (`gensee boundary run`) — and fills the fields it has
// a notion of; the others stay empty and are omitted. Readers (the CLI,
// records retention, audits) decode this type and nothing else.
type Admission struct {
	OperationID string         `json:"operation_id"`
	Namespace   string         `json:"namespace"`
	ContainerID string         `json:"container_id"`
	CreatedAt   time.Time      `json:"created_at"`
	Facts       AdmissionFacts `json:"facts"`
	// Engine names the container engine an OCI hook ran under; recorded,
	// never matched.
	Engine string `json:"engine,omitempty"`
	AdmissionDecision
	// CapabilitiesRemoved are the capability sets CAP_NET_RAW was removed
	// from ("bounding", "effective", ...): [] when the shim checked and
	// removed none; null from a front door that never narrows a spec (OCI
	// hooks refuse instead, host runs hold no capabilities).
	CapabilitiesRemoved []string            `json:"capabilities_removed"`
	Seccomp             *SeccompEnforcement `json:"seccomp,omitempty"`
	// Notes are recorded, not refused (e.g. an unconfined LSM profile).
	Notes         []string  `json:"notes,omitempty"`
	Netns         NetnsKind `json:"netns"`
	NetnsPath     string    `json:"netns_path,omitempty"`
	UserNamespace bool      `json:"user_namespace,omitempty"`
	Table         string    `json:"table,omitempty"`
	// Subject is set once the workload's first process exists (the
	// boundary is bound to it).
	Subject  *Subject         `json:"subject,omitempty"`
	Deadline string           `json:"deadline,omitempty"`
	Command  *AdmittedCommand `json:"command,omitempty"` // host runs
	// Kubernetes: the pod CRI created the container for (the shim, in
	// CRI's namespace only).
	Kubernetes *KubernetesRef `json:"kubernetes,omitempty"`
	// Timing: how long admission and the bind took (the shim, once bound).
	Timing *AdmissionTiming `json:"timing,omitempty"`
}

// AdmissionTiming is the shim's Create, measured: AdmitMS from the request
// to runc being started (checks, catalog, observation, decision), BindMS
// the boundary's bind (subject, baseline, table installed and read back).
// Their sum is the latency admission and the boundary add to a Create
// besides runc's own.
type AdmissionTiming struct {
	AdmitMS float64 `json:"admit_ms"`
	BindMS  float64 `json:"bind_ms"`
}

// AdmissionFacts are the trusted facts admission matched selectors
// against: never anything the workload's author wrote.
type AdmissionFacts struct {
	ContainerdNamespace string `json:"containerd_namespace,omitempty"`
	Runtime             string `json:"runtime"`
	K8sNamespace        string `json:"k8s_namespace,omitempty"`
	// User and UID: the invoking user of a host run.
	User string  `json:"user,omitempty"`
	UID  *uint32 `json:"uid,omitempty"`
}

// AdmissionDecision is the decision every front door records: the
// contract, how it was chosen, the catalog it came from and the
// observation it was made for.
type AdmissionDecision struct {
	Selector          string             `json:"selector"`
	ContractID        string             `json:"contract_id"`
	ContractDigest    string             `json:"contract_digest"`
	Contract          Contract           `json:"contract"`
	SafeDefault       bool               `json:"safe_default"`
	FallbackFrom      string             `json:"fallback_from,omitempty"`
	Inference         *AdmittedInference `json:"inference,omitempty"`
	CatalogVersion    uint64             `json:"catalog_version"`
	CatalogDigest     string             `json:"catalog_digest"`
	CatalogExpiresAt  time.Time          `json:"catalog_expires_at"`
	Observation       Observation        `json:"observation"`
	ObservationDigest string             `json:"observation_digest"`
	// Analyzer is what asking the selector's node analyzer came to, when
	// the runtime asked it (no inference was attached).
	Analyzer *AnalyzerConsult `json:"analyzer,omitempty"`
}

// Outcomes of asking a node analyzer (AnalyzerConsult.Outcome).
const (
	ConsultAnswered    = "answered"    // a signed inference came back and was verified
	ConsultNoClass     = "no_class"    // the analyzer named no class (novel, tie, low confidence)
	ConsultTimeout     = "timeout"     // no answer within the selector's timeout
	ConsultUnreachable = "unreachable" // nothing listens on the endpoint
	ConsultMalformed   = "malformed"   // the answer is not an analyzer answer
	ConsultRejected    = "rejected"    // the inference failed verification (Detail: the reason)
)

// AnalyzerConsult records one request to a node analyzer: which, where,
// how long it took and what came of it. An outcome other than answered is
// "no inference": the selector's safe_default, or a refusal.
type AnalyzerConsult struct {
	Analyzer   string `json:"analyzer"`
	Endpoint   string `json:"endpoint"`
	Outcome    string `json:"outcome"`
	Detail     string `json:"detail,omitempty"`
	TookMicros int64  `json:"took_us"`
	History    int    `json:"history,omitempty"` // earlier manifests the request named
}

// AdmittedInference describes an inference whose signature verified against
// the catalog's analyzer key.
type AdmittedInference struct {
	Analyzer          string    `json:"analyzer"`
	Model             string    `json:"model"`
	Class             string    `json:"class"` // the top candidate
	ConfidenceBP      int       `json:"confidence_bp"`
	MarginBP          int       `json:"margin_bp"` // top minus second (a lone candidate: its confidence)
	ObservationDigest string    `json:"observation_digest"`
	EnvelopeSHA256    string    `json:"envelope_sha256"` // hex sha256 of the annotation bytes
	IssuedAt          time.Time `json:"issued_at"`
	ExpiresAt         time.Time `json:"expires_at"`
}

// AdmittedCommand is the host command a host run admitted: what its
// command digest covers, plus where it ran.
type AdmittedCommand struct {
	Args       []string `json:"args"`
	Env        []string `json:"env"`
	Cwd        string   `json:"cwd"`
	Executable string   `json:"executable"` // the path argv[0] resolved to
	Workspace  string   `json:"workspace"`
	// Interpreter is the #! interpreter of a script, executed from a
	// sealed copy of these bytes with the script passed by a sealed fd.
	Interpreter *HostFile `json:"interpreter,omitempty"`
}

// HostFile is a host file as it was executed: its path and the sha256 of
// the sealed copy that ran.
type HostFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}
