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
// (version, digest, expiry), the observation it was made for
// (d.Observation, volatile env left out) and the analyzer asked, if any.
func Record(d Decision, catalogVersion uint64, catalogDigest string, catalogExpires time.Time) Recorded {
	return Recorded{
		Selector: d.Selector, ContractID: d.ContractID, ContractDigest: d.ContractDigest, Contract: *d.Contract,
		SafeDefault: d.SafeDefault, FallbackFrom: string(d.FallbackFrom), Inference: d.Inference,
		CatalogVersion: catalogVersion, CatalogDigest: catalogDigest, CatalogExpiresAt: catalogExpires,
		Observation: d.Observation, ObservationDigest: d.ObservationDigest, Analyzer: d.Analyzer,
	}
}
