package spec

import "time"

// Schema identifiers and DSSE payload types. A document whose schema or
// envelope payloadType differs is refused.
const (
	SchemaCatalog     = "gensee.catalog/v1"
	SchemaInference   = "gensee.inference/v1"
	SchemaObservation = "gensee.observation/v1"
	SchemaManifest    = "gensee.manifest/v1"
	SchemaEvent       = "gensee.event/v1"
	SchemaReceipt     = "gensee.receipt/v1"
	SchemaPromotion   = "gensee.promotion/v1"

	PayloadTypeCatalog   = "application/vnd.gensee.catalog.v1+json"
	PayloadTypeInference = "application/vnd.gensee.inference.v1+json"
	PayloadTypeReceipt   = "application/vnd.gensee.receipt.v1+json"
)

// Catalog is the signed payload an operator publishes: approved contracts,
// delegated analyzers, caller selectors and their routes, and the semantic
// verifiers whose receipts gensee promote accepts.
type Catalog struct {
	Schema    string              `json:"schema"`
	Version   uint64              `json:"version"`
	IssuedAt  time.Time           `json:"issued_at"`
	ExpiresAt time.Time           `json:"expires_at"`
	Contracts map[string]Contract `json:"contracts"`
	Analyzers []Analyzer          `json:"analyzers,omitempty"`
	Selectors []Selector          `json:"selectors"`
	Verifiers []Verifier          `json:"verifiers,omitempty"`
	// known holds the contracts of a catalog decoded by
	// DecodeKnownCatalog (Contracts nil); read contracts through Contract.
	known *knownContracts
}

// Analyzer is a delegated classifier: which models it may speak for, the key
// that signs its inferences, and the classes it may name.
type Analyzer struct {
	ID              string   `json:"id"`
	Models          []string `json:"models"`
	PublicKey       string   `json:"public_key"` // 64 hex chars, ed25519
	Classes         []string `json:"classes"`
	MinConfidenceBP int      `json:"min_confidence_bp"`
	MinMarginBP     int      `json:"min_margin_bp"`
	MaxLifetime     string   `json:"max_lifetime"` // Go duration: expires_at - issued_at may not exceed it
	// RulesKey is the operator key (ed25519, 64 hex) that signs the rule
	// sets of the reference analyzer (gensee analyzer serve) running as
	// this analyzer; empty when this analyzer is not the reference one.
	RulesKey string `json:"rules_key,omitempty"`
}

// Verifier is a delegated semantic verifier: the key that signs its
// receipts, the product classes it may judge, and how long one of its
// receipts may live. A receipt is guidance from a party the operator
// trusts; whether a product is promoted is decided by the host's checks
// (gensee promote, docs/design.md §15).
type Verifier struct {
	ID          string   `json:"id"`
	PublicKey   string   `json:"public_key"`   // 64 hex chars, ed25519
	Classes     []string `json:"classes"`      // product classes (ClassBlob, ...)
	MaxLifetime string   `json:"max_lifetime"` // Go duration: expires_at - issued_at may not exceed it
}

// Selector matches trusted facts about the caller exactly and routes
// inferred classes to contract ids.
type Selector struct {
	ID          string            `json:"id"`
	Match       SelectorMatch     `json:"match"`
	Routes      map[string]string `json:"routes,omitempty"`
	SafeDefault string            `json:"safe_default,omitempty"`
	// Analyzer names the node analyzer the runtime asks for an inference
	// when the caller attached none (docs/design.md §3.1).
	Analyzer *SelectorAnalyzer `json:"analyzer,omitempty"`
	// VolatileEnv lists environment variables (names, or patterns with a
	// leading and/or trailing '*') whose values this selector's callers
	// vary from run to run: they are left out of the command digest, and
	// the observation records their names (StableEnv, docs/design.md §3.2).
	VolatileEnv []string `json:"volatile_env,omitempty"`
}

// SelectorAnalyzer is where and how long the runtime asks an analyzer.
type SelectorAnalyzer struct {
	ID       string `json:"id"`       // an analyzer of this catalog; its key must sign the answer
	Endpoint string `json:"endpoint"` // absolute path of the analyzer's unix socket on the node
	Timeout  string `json:"timeout"`  // Go duration, at most MaxAnalyzerTimeout: past it, no inference
}

// SelectorMatch lists the trusted facts a selector requires. Every field that
// is set must equal the fact exactly; empty fields are not compared, but at
// least one must be set.
type SelectorMatch struct {
	ContainerdNamespace string `json:"containerd_namespace,omitempty"`
	Runtime             string `json:"runtime,omitempty"`
	K8sNamespace        string `json:"k8s_namespace,omitempty"`
	// User is the invoking user of a host command (`gensee boundary run`):
	// a login name or a decimal uid (see ValidUser). It matches the user
	// the runtime found, by name or by uid; container callers have no user
	// fact, so a selector that sets it matches no container.
	User string `json:"user,omitempty"`
}

// Inference is an analyzer's signed classification of one observation.
type Inference struct {
	Schema            string      `json:"schema"`
	Analyzer          string      `json:"analyzer"`
	Model             string      `json:"model"`
	ObservationDigest string      `json:"observation_digest"` // "sha256:<hex>"
	Candidates        []Candidate `json:"candidates"`
	IssuedAt          time.Time   `json:"issued_at"`
	ExpiresAt         time.Time   `json:"expires_at"`
}

// Candidate is one ranked class with its confidence in basis points (0..10000).
type Candidate struct {
	Class        string `json:"class"`
	ConfidenceBP int    `json:"confidence_bp"`
}

// Observation is what the runtime itself derives from a bundle at Create.
type Observation struct {
	Schema           string `json:"schema"`
	UID              uint32 `json:"uid"`
	GID              uint32 `json:"gid"`
	ExecutableSHA256 string `json:"executable_sha256"` // hex
	CommandDigest    string `json:"command_digest"`    // "sha256:<hex>"
	// VolatileEnv names the environment variables the selector's
	// volatile_env left out of CommandDigest (sorted, distinct).
	VolatileEnv []string `json:"volatile_env,omitempty"`
}
