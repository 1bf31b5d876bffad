package service

import (
	"testing"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/spec"
)

// TestHashForAnalyzer: a pending observation is hashed before the
// decision when, and only when, the selector's analyzer will be asked; the
// analyzer then sees the whole observation and complete decides nothing
// again.
func TestHashForAnalyzer(t *testing.T) {
	base, _ := completeFixture(t)
	base.close()
	cat := base.input.Catalog
	asking := *cat
	asking.Selectors = []spec.Selector{cat.Selectors[0]}
	asking.Selectors[0].Analyzer = &spec.SelectorAnalyzer{ID: "ref", Endpoint: "/run/gensee/analyzer.sock", Timeout: "200ms"}
	f := base.input.Facts
	cases := []struct {
		name     string
		cat      *spec.Catalog
		attached bool
		hashed   bool
	}{
		{"analyzer asked", &asking, false, true},
		{"inference attached", &asking, true, false},
		{"selector without analyzer", cat, false, false},
	}
	for _, tc := range cases {
		adm, _ := completeFixture(t)
		o := observed{p: adm.pending, obs: adm.pending.Partial()}
		adm.pending = nil
		if rf := hashForAnalyzer(&o, tc.cat, f, tc.attached); rf != nil {
			t.Fatalf("%s: %v", tc.name, rf)
		}
		if hashed := o.p == nil && o.obs.ExecutableSHA256 != ""; hashed != tc.hashed {
			t.Errorf("%s: hashed %v, want %v", tc.name, hashed, tc.hashed)
		}
		if o.p != nil {
			o.p.Close()
			continue
		}
		var asked spec.Observation
		in := adm.input
		in.Catalog, in.Observation = tc.cat, o.obs
		in.Ask = func(_ *spec.Selector, obs spec.Observation, _ string, _ spec.Command) ([]byte, spec.AnalyzerConsult) {
			asked = obs
			return nil, spec.AnalyzerConsult{Outcome: spec.ConsultTimeout}
		}
		d := admission.Decide(in)
		if !d.Admitted || d.Analyzer == nil || asked.ExecutableSHA256 == "" || d.ObservationDigest == "" {
			t.Errorf("%s: decision %s, consult %+v, asked about %+v", tc.name, d.Reason, d.Analyzer, asked)
		}
	}
}

// TestHashForAnalyzerRefusal: a hash that fails refuses the task, and
// nothing is left pending.
func TestHashForAnalyzerRefusal(t *testing.T) {
	adm, _ := completeFixture(t)
	asking := *adm.input.Catalog
	asking.Selectors = []spec.Selector{asking.Selectors[0]}
	asking.Selectors[0].Analyzer = &spec.SelectorAnalyzer{ID: "ref", Endpoint: "/run/a.sock", Timeout: "1s"}
	o := observed{p: adm.pending}
	adm.pending = nil
	o.p.Close() // the executable's fd is gone: Hash fails
	if rf := hashForAnalyzer(&o, &asking, adm.input.Facts, false); rf == nil || rf.Reason != "observation" || o.p != nil {
		t.Fatalf("refusal %v, pending %v", rf, o.p)
	}
}

func TestCRIImage(t *testing.T) {
	a := map[string]string{AnnotationImageName: "registry.example/app:1.2"}
	if got := criImage(CRINamespace, a); got != "registry.example/app:1.2" {
		t.Errorf("k8s.io: %q", got)
	}
	if got := criImage("builds", a); got != "" {
		t.Errorf("outside CRI's namespace the annotation is a caller's: %q", got)
	}
}
