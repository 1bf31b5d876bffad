package admission

import (
	"time"

	"github.com/gensee/gensee/spec"
)

// Recorded is the part of admission.json every front door (the shim, host
// runs, OCI hooks) writes: why this contract governs the operation. Each
// front door embeds it in its own record, next to who the subject is.
type Recorded struct {
	Selector          string            `json:"selector"`
	ContractID        string            `json:"contract_id"`
	ContractDigest    string            `json:"contract_digest"`
	Contract          spec.Contract     `json:"contract"`
	SafeDefault       bool              `json:"safe_default"`
	FallbackFrom      string            `json:"fallback_from,omitempty"`
	Inference         *InferenceSummary `json:"inference,omitempty"`
	CatalogVersion    uint64            `json:"catalog_version"`
	CatalogDigest     string            `json:"catalog_digest"`
	CatalogExpiresAt  time.Time         `json:"catalog_expires_at"`
	Observation       spec.Observation  `json:"observation"`
	ObservationDigest string            `json:"observation_digest"`
}

// Record is what an admitted decision d records: the catalog it came from
// (version, digest, expiry) and the observation it was made for.
func Record(d Decision, catalogVersion uint64, catalogDigest string, catalogExpires time.Time, obs spec.Observation, obsDigest string) Recorded {
	return Recorded{
		Selector: d.Selector, ContractID: d.ContractID, ContractDigest: d.ContractDigest, Contract: *d.Contract,
		SafeDefault: d.SafeDefault, FallbackFrom: string(d.FallbackFrom), Inference: d.Inference,
		CatalogVersion: catalogVersion, CatalogDigest: catalogDigest, CatalogExpiresAt: catalogExpires,
		Observation: obs, ObservationDigest: obsDigest,
	}
}
