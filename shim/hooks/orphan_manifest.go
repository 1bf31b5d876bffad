package hooks

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/watchdog/evidence"
	"github.com/gensee/gensee/spec"
)

// maxOrphanDrift bounds the drifts an orphan's manifest takes from the
// events log (the log has every one), as the monitor's own list is.
const maxOrphanDrift = 16

// writeOrphanManifest writes the manifest of an operation whose monitor
// died, from its admission record and what the monitor had logged. It
// claims nothing the cleanup did not see or do:
//
//   - the network status is unwatched (installed and read back, then no
//     sensor after the monitor's death), or drift_detected/escape_detected
//     when the monitor had logged a table_tampered/policy_unbound event
//     before it died; those escapes are listed, not killed (the binding
//     sensor's pids and start times died with it);
//   - counters and denied attempts are not read (the table outlived its
//     watcher; what it counts since is not known to be the plan's), so the
//     attempts are never complete;
//   - the gate does not run (verdict not_run): the cleanup runs inside
//     another container's hook, whose timeout bounds it, and nothing is
//     staged;
//   - drained is what the cleanup's drain killed; the exit status is
//     unknown (0, as for every hook operation).
func writeOrphanManifest(st record.Store, m marker, o *orphanEnd) error {
	var adm admissionRecord
	if err := st.ReadJSON(m.OperationID, record.AdmissionFile, &adm); err != nil {
		return fmt.Errorf("read the admission record: %w", err)
	}
	dir, err := st.OperationDir(m.OperationID)
	if err != nil {
		return err
	}
	o.Drift, o.Escapes = monitorEvidence(filepath.Join(dir, record.EventsFile))
	o.Unwatched = fmt.Sprintf("the monitor process (pid %d) died while the container ran", m.Monitor.PID)
	o.CountErr = errors.New("not read: the operation's monitor process died, and what the table counted after that was not watched")
	op := &operation{adm: &adm, store: st}
	mf := op.manifest(engine.Facts{Exit: o.Exit, Started: adm.CreatedAt}, orphanSentence(m, o))
	if err := st.WriteJSON(m.OperationID, record.ManifestFile, mf); err != nil {
		return err
	}
	o.manifest = true
	return nil
}

// orphanSentence is the manifest's not_enforced line for a cleanup.
func orphanSentence(m marker, o *orphanEnd) string {
	return fmt.Sprintf("monitor died: the operation's monitor process (pid %d) died while the container ran, so from then on the table was not watched for drift, escapes were not looked for, and denied attempts were not heard; a later OCI hook cleaned up: %s, then the table was removed; the exit status is unknown and the gate did not run (nothing staged)",
		m.Monitor.PID, o.drainNote)
}

// monitorEvidence is what the dead monitor had logged against the
// boundary: the table drifts (table_tampered details) and the escapes
// (policy_unbound targets "pid N in /cgroup"), oldest first. An unreadable
// log gives none: the status is then unwatched, which claims nothing.
func monitorEvidence(path string) (drift []string, escapes []spec.Escape) {
	c, err := events.Read(path)
	if err != nil {
		return nil, nil
	}
	for _, ev := range c.Events {
		switch ev.Kind {
		case spec.EventTableTampered:
			if len(drift) < maxOrphanDrift {
				drift = append(drift, ev.Detail)
			}
		case spec.EventPolicyUnbound:
			if e, ok := escapeOf(ev); ok && len(escapes) < evidence.MaxEscapes {
				escapes = append(escapes, e)
			}
		}
	}
	return drift, escapes
}

// escapeOf reads an escape from a policy_unbound event's target
// (evidence.Escape.Target); findings without one (a poll's failure, the
// list's overflow) are none.
func escapeOf(ev spec.Event) (spec.Escape, bool) {
	rest, ok := strings.CutPrefix(ev.Target, "pid ")
	if !ok {
		return spec.Escape{}, false
	}
	pid, cg, ok := strings.Cut(rest, " in ")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil || n <= 0 || !strings.HasPrefix(cg, "/") {
		return spec.Escape{}, false
	}
	return spec.Escape{PID: n, Cgroup: cg, At: ev.At}, true
}
