package admission

import (
	"time"

	"github.com/gensee/gensee/spec"
)

// Recorded is the part of admission.json every front door (the shim, host
// runs, OCI hooks) writes: why this contract governs the operation
// (spec.Admission embeds it).
type Recorded = spec.AdmissionDecision

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
