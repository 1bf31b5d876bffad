package spec

import (
	"strings"
	"testing"
)

// historyManifest is a run an inference admitted that ended clean.
func historyManifest() Manifest {
	return Manifest{Schema: SchemaManifest, Inference: InferenceSummary{Analyzer: "ref-analyzer", Model: "m", Class: "build", ConfidenceBP: 9000},
		Enforcement: Enforcement{Network: NetworkEnforcement{Mechanism: "nftables", Status: NetworkEnforced}},
		Observation: Observed{DeniedAttempts: DeniedAttempts{Complete: true}},
		Gate:        GateResult{Verdict: VerdictPass}}
}

// TestHistoryVerdict: any sign of trouble is unclean, a missing record
// uncertain, all well clean; each says why.
func TestHistoryVerdict(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Manifest)
		want HistoryVerdict
		why  string
	}{
		{"clean", func(*Manifest) {}, HistoryClean, "ended clean"},
		{"network status unset", func(m *Manifest) { m.Enforcement.Network.Status = "" }, HistoryClean, ""},
		{"finding", func(m *Manifest) { m.Findings = []Finding{{Signature: "deny_then_reach"}} }, HistoryUnclean, "finding deny_then_reach"},
		{"gate failed", func(m *Manifest) { m.Gate.Verdict = VerdictFail }, HistoryUnclean, "gate failed"},
		{"denied attempt", func(m *Manifest) {
			m.Observation.DeniedAttempts.Items = []DeniedAttempt{{Target: "203.0.113.9:443", Proto: "tcp"}}
		}, HistoryUnclean, "denied attempt to 203.0.113.9:443"},
		{"denied packets", func(m *Manifest) { m.Observation.Counters.DeniedPackets = 1 }, HistoryUnclean, "denied packets"},
		{"escape", func(m *Manifest) { m.Enforcement.Network.Status = NetworkEscapeDetected }, HistoryUnclean, "network"},
		{"drift", func(m *Manifest) { m.Enforcement.Network.Status = NetworkDriftDetected }, HistoryUnclean, "network"},
		{"defeat", func(m *Manifest) { m.Enforcement.Network.Status = NetworkDefeatDetected }, HistoryUnclean, "network"},
		{"unclean beats uncertain", func(m *Manifest) { m.Gate.Verdict = VerdictFail; m.FindingsError = "x" }, HistoryUnclean, "gate failed"},
		{"gate not run", func(m *Manifest) { m.Gate.Verdict = VerdictNotRun }, HistoryUncertain, "gate verdict"},
		{"findings unread", func(m *Manifest) { m.FindingsError = "eio" }, HistoryUncertain, "findings unread"},
		{"counters unread", func(m *Manifest) { m.Observation.Counters.Error = "netlink" }, HistoryUncertain, "counters unread"},
		{"unwatched", func(m *Manifest) { m.Enforcement.Network.Status = NetworkUnwatched }, HistoryUncertain, "not enforced"},
		{"deadline", func(m *Manifest) { m.Deadlines.Exceeded = true }, HistoryUncertain, "deadline exceeded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := historyManifest()
			tt.edit(&m)
			v, why := m.HistoryVerdict()
			if v != tt.want || !strings.Contains(why, tt.why) || why == "" || !v.Valid() {
				t.Fatalf("HistoryVerdict = %s, %q; want %s, %q", v, why, tt.want, tt.why)
			}
		})
	}
	if HistoryVerdict("ok").Valid() {
		t.Error(`"ok" is a valid verdict`)
	}
}

// TestHistoryClass: only a run an inference admitted has a class.
func TestHistoryClass(t *testing.T) {
	m := historyManifest()
	if m.HistoryClass() != "build" {
		t.Errorf("class %q", m.HistoryClass())
	}
	m.Inference.SafeDefault = true
	if m.HistoryClass() != "" {
		t.Errorf("a safe_default run has class %q", m.HistoryClass())
	}
}
