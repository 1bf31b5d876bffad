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

// TrustCurrent reports whether cat, which LoadTrust loaded from path for
// cfg a moment before, is what LoadTrust would give now: the same file
// bytes, the same anchor, within its validity window, and still admitted
// by the high-water mark (trust.Loaded.Current). A caller that loaded
// ahead of its need loads again otherwise.
func TrustCurrent(cfg config.Config, cat *trust.Loaded, path string, now time.Time) bool {
	anchor, err := trust.LoadAnchor(cfg.TrustAnchor)
	if err != nil {
		return false
	}
	return cat.Current(path, anchor, trust.NewFileState(trust.StateFile(cfg.StateDir)), now)
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
