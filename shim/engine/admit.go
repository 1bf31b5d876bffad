package engine

import (
	"time"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/trust"
	"github.com/gensee/gensee/spec"
)

// Reasons of the trust inputs' refusals, the same through every door.
const (
	ReasonTrustAnchor = "trust_anchor"
	ReasonCatalog     = "catalog"
)

// LoadTrust loads the operator's trust anchor and the catalog it verifies
// at path (the operator's, or a host run's --catalog, which field names),
// and records the accepted version in the state dir (docs/design.md §3);
// or refuses.
func LoadTrust(cfg config.Config, path, field string, now time.Time) (*trust.Loaded, *spec.Refusal) {
	anchor, err := trust.LoadAnchor(cfg.TrustAnchor)
	if err != nil {
		return nil, spec.Refuse(ReasonTrustAnchor, "trust_anchor", "", "%v", err)
	}
	cat, err := trust.LoadCatalog(path, anchor, trust.NewFileState(trust.StateFile(cfg.StateDir)), now)
	if err != nil {
		return nil, spec.Refuse(ReasonCatalog, field, "", "%v", err)
	}
	return cat, nil
}

// RecheckTrust applies LoadTrust's one rule that depends on the time, the
// catalog's validity window, at now to cat, which LoadTrust loaded from
// path a moment before: the refusal LoadTrust would have given at now.
func RecheckTrust(cat *trust.Loaded, path, field string, now time.Time) *spec.Refusal {
	if err := trust.CheckWindow(path, cat.Catalog, now); err != nil {
		return spec.Refuse(ReasonCatalog, field, "", "%v", err)
	}
	return nil
}

// Decide decides which one contract of cat governs in's observation
// (admission.Decide) and returns what admission.json records of it; or the
// decision's refusal: its reason and message (which names the fix), the
// field left to the door, which knows what its caller calls the input.
func Decide(cat *trust.Loaded, in admission.Input) (admission.Recorded, *spec.Refusal) {
	in.Catalog, in.CatalogVersion = cat.Catalog, cat.Version
	d := admission.Decide(in)
	if !d.Admitted {
		return admission.Recorded{}, d.Refusal()
	}
	if d.ObservationDigest == "" {
		return admission.Recorded{}, spec.Refuse(string(admission.ReasonObservationInvalid), "", "", "the observation admitted under %q is incomplete", d.ContractID)
	}
	return admission.Record(d, cat.Version, cat.Digest, cat.Catalog.ExpiresAt), nil
}
