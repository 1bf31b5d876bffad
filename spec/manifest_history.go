package spec

// How an earlier run counts in a node analyzer's history (docs/design.md
// §3 "The node analyzer"). The judgement lives here alone: the runtime
// records it in its history index (shim/record), the reference analyzer
// makes it again from the manifest it reads (shim/analyzer/reference).
//
// Only runs admitted by an inference have a history: HistoryClass is ""
// for a run the safe_default governed, and such a run neither counts nor
// withholds.

// HistoryVerdict is how a run ended, for history.
type HistoryVerdict string

const (
	// HistoryClean counts for the run's class: every record says all
	// was well.
	HistoryClean HistoryVerdict = "clean"
	// HistoryUnclean withholds the run's class: some record shows
	// trouble.
	HistoryUnclean HistoryVerdict = "unclean"
	// HistoryUncertain neither counts nor withholds: a record that would
	// tell is missing (gate not run, counters unread, network not
	// enforced, deadline exceeded).
	HistoryUncertain HistoryVerdict = "uncertain"
)

// Valid reports whether v is one of the verdicts.
func (v HistoryVerdict) Valid() bool {
	return v == HistoryClean || v == HistoryUnclean || v == HistoryUncertain
}

// HistoryClass is the class m's run was admitted under by an inference:
// its top candidate's class, "" when the safe_default governed or there
// was no class.
func (m *Manifest) HistoryClass() string {
	if m.Inference.SafeDefault {
		return ""
	}
	return m.Inference.Class
}

// HistoryVerdict judges how m's run ended and says why: unclean on any
// sign of trouble (a finding, a failed gate, a denied attempt or packet,
// an escape, drift or defeat of the network table), clean only when every
// record says all was well, uncertain otherwise.
func (m *Manifest) HistoryVerdict() (HistoryVerdict, string) {
	if why := m.uncleanBecause(); why != "" {
		return HistoryUnclean, why
	}
	net, obs := m.Enforcement.Network.Status, m.Observation
	switch {
	case m.Gate.Verdict != VerdictPass:
		return HistoryUncertain, "gate verdict " + string(m.Gate.Verdict) + ", not pass"
	case m.FindingsError != "":
		return HistoryUncertain, "findings unread"
	case obs.Counters.Error != "":
		return HistoryUncertain, "counters unread"
	case net != NetworkEnforced && net != "":
		return HistoryUncertain, "network " + string(net) + ", not enforced"
	case m.Deadlines.Exceeded:
		return HistoryUncertain, "deadline exceeded"
	}
	return HistoryClean, "ended clean"
}

// uncleanBecause names the first sign of trouble m records, or "".
func (m *Manifest) uncleanBecause() string {
	net, obs := m.Enforcement.Network.Status, m.Observation
	switch {
	case len(m.Findings) > 0:
		return "finding " + m.Findings[0].Signature
	case m.Gate.Verdict == VerdictFail:
		return "gate failed"
	case len(obs.DeniedAttempts.Items) > 0:
		return "denied attempt to " + obs.DeniedAttempts.Items[0].Target
	case obs.Counters.DeniedPackets > 0:
		return "denied packets"
	case net == NetworkEscapeDetected, net == NetworkDriftDetected, net == NetworkDefeatDetected:
		return "network " + string(net)
	case len(obs.Escapes) > 0:
		return "escape"
	case len(obs.TableDrift) > 0:
		return "table drift"
	}
	return ""
}
