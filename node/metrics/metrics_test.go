package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gensee/gensee/node/records"
	"github.com/gensee/gensee/spec"
)

// TestObserve: each record moves its own series by one, with the
// record's labels; the histogram takes admit plus bind time.
func TestObserve(t *testing.T) {
	m := New(false)
	op := records.Operation{Selector: "ci", Contract: "build"}
	for _, r := range []records.Record{
		records.Refusal{RefusalRecord: spec.RefusalRecord{Reason: "no_selector"}},
		records.Refusal{RefusalRecord: spec.RefusalRecord{Reason: "low_confidence", Selector: "ci"}},
		records.Refusal{RefusalRecord: spec.RefusalRecord{Reason: "low_confidence", Selector: "ci"}},
		records.Admission{Op: op, Reason: "admitted", Timing: &spec.AdmissionTiming{AdmitMS: 30, BindMS: 10}},
		records.Admission{Op: op, Reason: "safe_default"},
		records.EgressDenied{Op: op},
		records.EgressDenied{Op: op},
		records.Finding{Op: op, Finding: spec.Finding{Signature: "deny_then_reach"}},
		records.Gate{Op: op, Classes: []records.ClassVerdict{{Class: "structured_result", Verdict: "pass"}, {Class: "blob_set", Verdict: "fail"}}},
	} {
		m.Observe(r)
	}
	for _, tc := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.refusals.WithLabelValues("", "no_selector")), 1, "refusals no_selector"},
		{testutil.ToFloat64(m.refusals.WithLabelValues("ci", "low_confidence")), 2, "refusals ci low_confidence"},
		{testutil.ToFloat64(m.admissions.WithLabelValues("ci", "build", "admitted")), 1, "admissions admitted"},
		{testutil.ToFloat64(m.admissions.WithLabelValues("ci", "build", "safe_default")), 1, "admissions safe_default"},
		{testutil.ToFloat64(m.egressDenied.WithLabelValues("ci", "build")), 2, "egress denied"},
		{testutil.ToFloat64(m.findings.WithLabelValues("deny_then_reach")), 1, "findings"},
		{testutil.ToFloat64(m.gate.WithLabelValues("blob_set", "fail")), 1, "gate blob_set fail"},
		{testutil.ToFloat64(m.gate.WithLabelValues("structured_result", "pass")), 1, "gate structured_result pass"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	want := `
# HELP gensee_admission_bind_seconds Time a Create spent in admission (to runc started) plus the boundary's bind (table installed and read back), from admission.json's timing.
# TYPE gensee_admission_bind_seconds histogram
gensee_admission_bind_seconds_bucket{le="0.005"} 0
gensee_admission_bind_seconds_bucket{le="0.01"} 0
gensee_admission_bind_seconds_bucket{le="0.025"} 0
gensee_admission_bind_seconds_bucket{le="0.05"} 1
gensee_admission_bind_seconds_bucket{le="0.1"} 1
gensee_admission_bind_seconds_bucket{le="0.25"} 1
gensee_admission_bind_seconds_bucket{le="0.5"} 1
gensee_admission_bind_seconds_bucket{le="1"} 1
gensee_admission_bind_seconds_bucket{le="2.5"} 1
gensee_admission_bind_seconds_bucket{le="5"} 1
gensee_admission_bind_seconds_bucket{le="+Inf"} 1
gensee_admission_bind_seconds_sum 0.04
gensee_admission_bind_seconds_count 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "gensee_admission_bind_seconds"); err != nil {
		t.Error(err)
	}
}

// TestHandler: the endpoint serves the exposition format.
func TestHandler(t *testing.T) {
	m := New(true)
	m.Observe(records.Finding{Finding: spec.Finding{Signature: "table_tampered"}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	for _, s := range []string{`gensee_findings_total{signature="table_tampered"} 1`, "go_goroutines"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}
}
