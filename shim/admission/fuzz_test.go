package admission

import (
	"crypto/ed25519"
	"testing"

	"github.com/gensee/gensee/spec"
)

// FuzzDecide feeds arbitrary annotation bytes. Decide must never panic,
// every decision must be well formed, and an admission that is not a
// safe_default must rest on an inference the catalog's analyzer key signed
// for this very observation.
func FuzzDecide(f *testing.F) {
	fx := newFixture(f)
	good := fx.env(f, nil)
	pre := mustJSON(f, fx.obs)
	f.Add(good, pre, false)
	f.Add(good, []byte(nil), true)
	f.Add(signed(f, spec.PayloadTypeInference, fx.inference(nil), genKey(f)), pre, false)
	f.Add(fx.env(f, func(i *spec.Inference) { i.Candidates = []spec.Candidate{{Class: "lint", ConfidenceBP: 9999}} }), []byte(nil), true)
	f.Add([]byte(`{"payloadType":"application/vnd.gensee.inference.v1+json","payload":"e30=","signatures":[{"keyid":"","sig":"AAAA"}]}`), []byte(`{}`), false)
	f.Add([]byte(nil), []byte(`{"schema":"gensee.observation/v1"}`), true)
	f.Fuzz(func(t *testing.T, envelope, preflight []byte, builds bool) {
		facts := factsStrict
		if builds {
			facts = factsBuilds
		}
		in := fx.input(facts, envelope)
		in.PreflightObservation = preflight
		d := Decide(in)
		if d.Reason == "" || d.Message == "" {
			t.Fatalf("decision without reason: %+v", d)
		}
		if d.Admitted != (d.Contract != nil) || (d.Admitted && fx.cat.Contracts[d.ContractID].ID != d.ContractID) {
			t.Fatalf("admitted=%v with contract %q", d.Admitted, d.ContractID)
		}
		if d.SafeDefault && (!d.Admitted || !d.FallbackFrom.Fallback() || d.ContractID != "readonly") {
			t.Fatalf("bad safe_default decision: %+v", d)
		}
		if !d.Admitted || d.SafeDefault {
			return
		}
		env, err := spec.ParseEnvelope(envelope)
		if err != nil {
			t.Fatalf("admitted on an unparseable envelope: %v", err)
		}
		a := fx.cat.Analyzer(d.Inference.Analyzer)
		key, _ := a.Key()
		payload, err := env.Verify(spec.PayloadTypeInference, []ed25519.PublicKey{key}, 1)
		if err != nil {
			t.Fatalf("admitted an inference analyzer %s's key did not sign: %v", a.ID, err)
		}
		inf, err := spec.ParseInference(payload)
		if err != nil || inf.Analyzer != a.ID || inf.ObservationDigest != fx.obsDig {
			t.Fatalf("admitted an inference not made by %s for this observation: %+v %v", a.ID, inf, err)
		}
	})
}
