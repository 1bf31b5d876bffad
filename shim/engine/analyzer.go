package engine

import (
	"context"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/analyzer"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Asker is the admission.Asker of a front door (spec.DoorShim, DoorHooks,
// DoorHost): it asks the selector's node analyzer (shim/analyzer) about
// the stable observation, naming the earlier manifests the records in
// store hold for the same command digest, and image, the image reference
// CRI wrote ("" elsewhere). ctx bounds the consult beside the selector's
// timeout.
func Asker(ctx context.Context, door string, store record.Store, image string) admission.Asker {
	c := analyzer.NewClient()
	return func(sel *spec.Selector, obs spec.Observation, digest string, cmd spec.Command) ([]byte, spec.AnalyzerConsult) {
		req := AnalyzerRequest(door, sel, obs, digest, cmd, image, history(ctx, store, digest, sel.Analyzer.ID))
		if err := req.Validate(); err != nil {
			return nil, spec.AnalyzerConsult{Outcome: spec.ConsultMalformed, Detail: analyzer.Printable("not asked: the request is invalid: "+err.Error(), 240)}
		}
		return c.Ask(ctx, sel.Analyzer, &req)
	}
}

// AnalyzerRequest is what a door tells sel's analyzer: the stable
// observation obs (digest) of cmd, the door, the image and the history.
// The command's lists are never null (a strict reader refuses null).
func AnalyzerRequest(door string, sel *spec.Selector, obs spec.Observation, digest string, cmd spec.Command, image string, history []spec.HistoryRef) spec.AnalyzerRequest {
	if cmd.Args == nil {
		cmd.Args = []string{}
	}
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	return spec.AnalyzerRequest{
		Schema: spec.SchemaAnalyzerRequest, Analyzer: sel.Analyzer.ID, Selector: sel.ID, Door: door,
		Observation: obs, ObservationDigest: digest, Command: cmd, Image: image, History: history,
	}
}

// history names up to spec.MaxHistoryRefs earlier manifests of the
// observation digest admitted under analyzer's inferences, the unclean
// ones first (record.Store.History); none when the records have none or
// cannot be read (logged: the consult goes on without them).
func history(ctx context.Context, store record.Store, digest, analyzer string) []spec.HistoryRef {
	if store.Dir == "" {
		return nil
	}
	refs, err := store.History(digest, analyzer, spec.MaxHistoryRefs)
	if err != nil {
		log.G(ctx).WithError(err).Warn("read the observation's manifest history for the analyzer")
	}
	return refs
}
