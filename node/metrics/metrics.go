package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gensee/gensee/node/records"
)

// Metrics are the node's gensee metrics, in their own registry.
type Metrics struct {
	reg          *prometheus.Registry
	admissions   *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	egressDenied *prometheus.CounterVec
	findings     *prometheus.CounterVec
	gate         *prometheus.CounterVec
	admitBind    prometheus.Histogram
	malformed    prometheus.Counter
}

// Buckets of gensee_admission_bind_seconds: a Create's admission and bind
// take milliseconds (a warm catalog) to a second (an analyzer consulted,
// a large baseline).
var Buckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// New makes the metrics; withProcess adds the Go and process collectors.
func New(withProcess bool) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		m.reg.MustRegister(c)
		return c
	}
	m.admissions = counter("gensee_admissions_total", "Containers admitted and bound, by selector, contract and reason (admitted or safe_default).", "selector", "contract", "reason")
	m.refusals = counter("gensee_refusals_total", "Admission refusals (refusals.jsonl), by selector (empty before one matched) and reason.", "selector", "reason")
	m.egressDenied = counter("gensee_egress_denied_total", "Denied egress as logged (egress_denied events: rate-limited samples of the table's deny counter), by selector and contract.", "selector", "contract")
	m.findings = counter("gensee_findings_total", "control_defeat findings raised, by signature.", "signature")
	m.gate = counter("gensee_gate_verdicts_total", "Gate verdicts per declared product class (class \"none\": a contract without products), by verdict.", "class", "verdict")
	m.admitBind = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gensee_admission_bind_seconds",
		Help: "Time a Create spent in admission (to runc started) plus the boundary's bind (table installed and read back), from admission.json's timing.", Buckets: Buckets})
	m.malformed = prometheus.NewCounter(prometheus.CounterOpts{Name: "gensee_node_records_malformed_total", Help: "Record lines or files the node daemon could not parse (torn or over-long writes), skipped."})
	m.reg.MustRegister(m.admitBind, m.malformed)
	if withProcess {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Handler serves the registry in the exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the metrics' registry (tests gather it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Malformed adds n skipped records.
func (m *Metrics) Malformed(n int) { m.malformed.Add(float64(n)) }

// Observe counts one record.
func (m *Metrics) Observe(r records.Record) {
	switch r := r.(type) {
	case records.Refusal:
		m.refusals.WithLabelValues(r.Selector, r.Reason).Inc()
	case records.Admission:
		m.admissions.WithLabelValues(r.Op.Selector, r.Op.Contract, r.Reason).Inc()
		if r.Timing != nil {
			m.admitBind.Observe((r.Timing.AdmitMS + r.Timing.BindMS) / 1000)
		}
	case records.EgressDenied:
		m.egressDenied.WithLabelValues(r.Op.Selector, r.Op.Contract).Inc()
	case records.Finding:
		m.findings.WithLabelValues(r.Finding.Signature).Inc()
	case records.Gate:
		for _, c := range r.Classes {
			m.gate.WithLabelValues(c.Class, c.Verdict).Inc()
		}
	}
}
