package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// runOperation is boundary audit --operation / --container: read the
// operation's events and attention, classify, report.
func (o *auditOptions) runOperation(_ context.Context, env *Env) error {
	op, err := o.ref.resolve(env)
	if err != nil {
		return err
	}
	path, err := recordPath(op.dir, record.EventsFile)
	if err != nil {
		return err
	}
	log, err := events.Read(path)
	present := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(ExitUsage, "read events of operation "+op.id, err, "check the permissions of "+path)
	}
	if _, err := recordPath(op.dir, events.AttentionFile); err != nil {
		return err
	}
	att, attSet, err := events.ReadAttention(op.store(), op.id)
	if err != nil {
		return fail(ExitUsage, "read attention of operation "+op.id, err,
			"inspect "+filepath.Join(op.dir, events.AttentionFile))
	}
	m := manifestIfAny(op)
	rep := buildOperationAudit(op.id, op.who, log, present, att, attSet, m)
	rep.Served = servedOf(m)
	if o.json {
		err = writeJSON(env.Stdout, rep)
	} else {
		err = renderOperationAudit(env.Stdout, rep)
	}
	if err != nil {
		return fail(ExitUsage, "write report", err, "")
	}
	if rep.ExitCode == ExitOK {
		return nil
	}
	var sigs []string
	for _, f := range rep.Findings {
		if f.Class == ClassDefeated && !slices.Contains(sigs, f.Rule) {
			sigs = append(sigs, f.Rule)
		}
	}
	return fail(ExitDefeated, "", fmt.Errorf("operation %s defeated a control: %s", op.id, safeText(strings.Join(sigs, ", "))),
		"a person should review the evidence above; then 'gensee attention clear --operation "+op.id+"' clears its attention")
}

// renderOperationAudit writes the readable report: what defeated a
// control, what hit a wall (hint loops marked as guidance gaps), what was
// observed, and the verdict. Walls hit repeatedly (a retry loop) are one
// line with a count.
func renderOperationAudit(w io.Writer, rep OperationAudit) error {
	fmt.Fprintf(w, "operation %s", rep.OperationID)
	if rep.Container != "" {
		fmt.Fprintf(w, " (%s)", safeText(rep.Container))
	}
	fmt.Fprintf(w, "\nevents    %s", logLine(rep.Log))
	att := "not set"
	if rep.Attention {
		att = "set (control_defeat): clear it with 'gensee attention clear --operation " + rep.OperationID + "'"
	}
	fmt.Fprintf(w, "\nattention %s\n", att)

	sections := []struct{ class, title, none string }{
		{ClassDefeated, "DEFEATED A CONTROL (security finding: a boundary failed)", "none: no control_defeat signature fired"},
		{ClassHitAWall, "HIT A WALL (a boundary refused and held; not a security finding)", "none"},
		{ClassObserved, "OBSERVED (evidence the watchdog weighs; not a finding on its own)", ""},
	}
	for _, s := range sections {
		groups := groupFindings(rep.Findings, s.class)
		if len(groups) == 0 && s.none == "" {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", s.title)
		if len(groups) == 0 {
			fmt.Fprintf(w, "  %s\n", s.none)
		}
		for _, g := range groups {
			writeFindingGroup(w, g)
		}
	}
	if sv := rep.Served; sv != nil {
		fmt.Fprintf(w, "\nSERVED (inbound peers the table answered; not a finding)\n  ports  %s\n", serveLine(sv.Ports))
		lines := []string{"not counted (no counters in the manifest)"}
		if sv.Counted != nil {
			lines = servedLines(spec.NetworkEnforcement{Serve: sv.Ports}, spec.Observed{Served: sv.Counted})
		}
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	_, err := fmt.Fprintf(w, "\nverdict: %s (exit %d)\n", rep.Verdict, rep.ExitCode)
	return err
}

// manifestIfAny reads op's manifest for what the audit reports beside the
// events (served ports); nil while the task runs or when the record does
// not read or validate (manifest show says why).
func manifestIfAny(op *operation) *spec.Manifest {
	raw, err := readRecord(op.dir, record.ManifestFile, spec.MaxManifestBytes)
	if err != nil {
		return nil
	}
	m, err := spec.ParseManifest(raw)
	if err != nil {
		return nil
	}
	return m
}

func logLine(l OperationLog) string {
	if !l.Present {
		return "no events.jsonl: nothing recorded"
	}
	s := plural(l.Events, "event") + " in events.jsonl"
	if l.Dropped > 0 {
		s += fmt.Sprintf("; %d events dropped: the log reached its size bound", l.Dropped)
	}
	if l.Malformed > 0 {
		s += fmt.Sprintf("; %s skipped", plural(l.Malformed, "malformed line"))
	}
	if !l.Complete {
		s += " (this audit covers only what was written)"
	}
	return s
}

// findingGroup is the repeats of one wall, in or out of sequence: same
// kind, control, rule and target.
type findingGroup struct {
	first OperationFinding
	n     int
}

func groupFindings(all []OperationFinding, class string) []findingGroup {
	var out []findingGroup
	index := map[string]int{}
	for _, f := range all {
		if f.Class != class {
			continue
		}
		key := f.Kind + "\x00" + f.Control + "\x00" + f.Rule + "\x00" + f.Target
		if class == ClassDefeated {
			key += "\x00" + f.At.String() // every firing is its own line
		}
		if i, ok := index[key]; ok {
			out[i].n++
			continue
		}
		index[key] = len(out)
		out = append(out, findingGroup{first: f, n: 1})
	}
	return out
}

func writeFindingGroup(w io.Writer, g findingGroup) {
	f := g.first
	ctl := f.Control
	if f.Rule != "" {
		ctl += "/" + f.Rule
	}
	cols := []string{f.At.Local().Format(events.RowTime), f.Kind, ctl}
	for _, s := range []string{f.Target, f.Detail} {
		if s != "" {
			cols = append(cols, s)
		}
	}
	if g.n > 1 {
		cols = append(cols, "(x"+strconv.Itoa(g.n)+", first shown)")
	}
	fmt.Fprintf(w, "  %s\n", safeText(strings.Join(cols, "  ")))
	if f.GuidanceGap {
		fmt.Fprintf(w, "    guidance gap, not a security finding: the workload retried what the contract refuses\n")
	}
	if f.Hint != "" {
		fmt.Fprintf(w, "    %s%s\n", guidanceMark, safeText(f.Hint))
	}
	if f.Class == ClassDefeated {
		fmt.Fprintf(w, "    from %s; evidence: %s\n", strings.Join(f.Sources, " and "), safeText(orText(strings.Join(f.Evidence, "; "), "not recorded (see gensee events)")))
	}
}
