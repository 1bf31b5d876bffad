package reference

import (
	"context"
	"testing"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/spec"
)

// asker is the runtime's side of the protocol over ask (in-process or
// over the socket), as admission.Decide calls it.
func asker(t *testing.T, ask func(spec.AnalyzerRequest) (spec.AnalyzerAnswer, error)) admission.Asker {
	return func(sel *spec.Selector, obs spec.Observation, digest string, cmd spec.Command) ([]byte, spec.AnalyzerConsult) {
		req := spec.AnalyzerRequest{Schema: spec.SchemaAnalyzerRequest, Analyzer: sel.Analyzer.ID, Selector: sel.ID, Door: spec.DoorShim,
			Observation: obs, ObservationDigest: digest, Command: cmd}
		ans, err := ask(req)
		switch {
		case err != nil:
			t.Errorf("ask: %v", err)
			return nil, spec.AnalyzerConsult{Outcome: spec.ConsultMalformed, Detail: err.Error()}
		case ans.NoClass != "":
			return nil, spec.AnalyzerConsult{Outcome: spec.ConsultNoClass, Detail: ans.NoClass}
		}
		return ans.Inference, spec.AnalyzerConsult{}
	}
}

// replica is the runtime's re-derived observation and command of a pod
// replica: its HOSTNAME differs from every other replica's.
func replica(t *testing.T, hostname string, exe string, args ...string) (spec.Observation, spec.Command) {
	cmd := spec.Command{Args: args, Env: []string{"PATH=/usr/bin", "HOSTNAME=" + hostname}, Cwd: "/src"}
	d, err := cmd.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return spec.Observation{Schema: spec.SchemaObservation, UID: 1000, GID: 1000, ExecutableSHA256: exe, CommandDigest: d}, cmd
}

// TestRoundTripDecide: the analyzer's answer verifies through the
// runtime's admission: two replicas that differ only in HOSTNAME (volatile
// for the selector) are admitted under the routed contract, not the safe
// default; a command no rule knows falls back to the safe default.
func TestRoundTripDecide(t *testing.T) {
	fx := newFixture(t)
	a := fx.load()
	ask := asker(t, func(req spec.AnalyzerRequest) (spec.AnalyzerAnswer, error) {
		res, err := a.Infer(context.Background(), req, fx.now)
		return res.Answer, err
	})
	facts := admission.Facts{ContainerdNamespace: "builds", Runtime: rt}
	var digests []string
	for _, host := range []string{"builder-7d9f-abcde", "builder-7d9f-xyz12"} {
		obs, cmd := replica(t, host, exeGo, "go", "build", "./...")
		d := admission.Decide(admission.Input{Catalog: fx.cat, CatalogVersion: fx.cat.Version, Facts: facts, Observation: obs, Command: cmd, Now: fx.now, Ask: ask})
		if !d.Admitted || d.SafeDefault || d.ContractID != "offline" || d.Reason != admission.ReasonAdmitted ||
			d.Analyzer == nil || d.Analyzer.Outcome != spec.ConsultAnswered || d.Inference == nil || d.Inference.Class != "build" {
			t.Fatalf("%s: decision %+v (analyzer %+v)", host, d, d.Analyzer)
		}
		digests = append(digests, d.ObservationDigest)
	}
	if digests[0] != digests[1] {
		t.Errorf("replicas decided on observations %v; want one", digests)
	}
	obs, cmd := replica(t, "builder-1", exeGo, "go", "generate")
	d := admission.Decide(admission.Input{Catalog: fx.cat, CatalogVersion: fx.cat.Version, Facts: facts, Observation: obs, Command: cmd, Now: fx.now, Ask: ask})
	if !d.Admitted || !d.SafeDefault || d.FallbackFrom != admission.ReasonAnalyzerNoClass || d.Analyzer.Outcome != spec.ConsultNoClass {
		t.Fatalf("novel command: decision %+v (analyzer %+v)", d, d.Analyzer)
	}
}
