package hooks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// orphanFixture is an operation whose monitor (a pid that is not alive)
// died in a private netns, with its admission record and the events it
// had logged.
func orphanFixture(t *testing.T, evs ...spec.Event) (record.Store, marker) {
	t.Helper()
	st := record.Store{Dir: t.TempDir()}
	id := "0123456789abcdef0123456789abcdef"
	dir, err := st.CreateOperation(id, Namespace, "c1")
	if err != nil {
		t.Fatal(err)
	}
	adm := &admissionRecord{}
	adm.Netns = netnsPrivate
	adm.OperationID, adm.ContainerID, adm.Table = id, "c1", "gensee_0123456789ab"
	adm.CreatedAt = time.Now().Add(-time.Minute)
	adm.Contract = spec.Contract{ID: "c", Network: spec.Network{Mode: spec.NetworkDenyAll}}
	adm.Subject = &spec.Subject{InitPID: 4242, CgroupPath: "/p/c1", CgroupID: 77}
	if err := st.WriteJSON(id, record.AdmissionFile, adm); err != nil {
		t.Fatal(err)
	}
	var lines []byte
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		lines = append(append(lines, b...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, record.EventsFile), lines, 0o600); err != nil {
		t.Fatal(err)
	}
	m := marker{OperationID: id, ContainerID: "c1", Table: adm.Table, Netns: netnsPrivate, Monitor: owner{PID: 1 << 22, Start: 1}}
	if err := writeMarker(st.Dir, m); err != nil {
		t.Fatal(err)
	}
	return st, m
}

// TestCleanOrphanManifest: a dead monitor's cleanup writes a manifest that
// claims nothing it did not see: the gate not run, counters not read,
// attempts incomplete, the status unwatched, the monitor's death named;
// the operation is marked cleaned and the marker removed.
func TestCleanOrphanManifest(t *testing.T) {
	st, m := orphanFixture(t)
	cleaned, err := CleanOrphans(context.Background(), st.Dir)
	if err != nil || !slices.Equal(cleaned, []string{m.OperationID}) {
		t.Fatalf("cleaned %v, %v", cleaned, err)
	}
	var mf spec.Manifest
	if err := st.ReadJSON(m.OperationID, record.ManifestFile, &mf); err != nil {
		t.Fatal(err)
	}
	n := mf.Enforcement.Network
	switch {
	case mf.Gate.Verdict != spec.VerdictNotRun:
		t.Errorf("verdict %q, want not_run", mf.Gate.Verdict)
	case n.Status != spec.NetworkUnwatched:
		t.Errorf("network status %q, want unwatched", n.Status)
	case n.TableRemoved != "with_netns":
		t.Errorf("table removed %q", n.TableRemoved)
	case mf.Observation.DeniedAttempts.Complete:
		t.Error("denied attempts complete")
	case !strings.Contains(mf.Observation.Counters.Error, "monitor process died"):
		t.Errorf("counters error %q", mf.Observation.Counters.Error)
	case !slices.ContainsFunc(mf.Enforcement.NotEnforced, func(s string) bool {
		return strings.HasPrefix(s, "monitor died:") && strings.Contains(s, "nothing was drained")
	}):
		t.Errorf("not_enforced %q", mf.Enforcement.NotEnforced)
	case slices.ContainsFunc(mf.Enforcement.NotEnforced, func(s string) bool { return strings.HasPrefix(s, "poststop never came") }):
		t.Errorf("not_enforced claims the monitor finished: %q", mf.Enforcement.NotEnforced)
	case mf.Subject.CgroupID != 77:
		t.Errorf("subject %+v", mf.Subject)
	}
	dir, _ := st.OperationDir(m.OperationID)
	if _, err := os.Stat(filepath.Join(dir, record.CleanedMarker)); err != nil {
		t.Errorf("not marked cleaned: %v", err)
	}
	if _, err := os.Stat(filepath.Join(st.Dir, markersDir, m.OperationID+".json")); !os.IsNotExist(err) {
		t.Errorf("marker left: %v", err)
	}
}

// TestCleanOrphanEvidence: what the monitor logged before it died
// downgrades the status (a drift outranks the escape it also lists), and a
// manifest the monitor wrote itself is never replaced.
func TestCleanOrphanEvidence(t *testing.T) {
	at := time.Now().UTC().Truncate(time.Second)
	st, m := orphanFixture(t,
		spec.Event{Kind: spec.EventPolicyUnbound, Control: "cgroup", Target: "pid 99 in /elsewhere", At: at, Detail: "left"},
		spec.Event{Kind: spec.EventPolicyUnbound, Control: "cgroup", At: at, Detail: "binding poll failed"},
		spec.Event{Kind: spec.EventTableTampered, Control: "network", Detail: "table gensee_0123456789ab is missing", At: at})
	if _, err := CleanOrphans(context.Background(), st.Dir); err != nil {
		t.Fatal(err)
	}
	var mf spec.Manifest
	if err := st.ReadJSON(m.OperationID, record.ManifestFile, &mf); err != nil {
		t.Fatal(err)
	}
	if mf.Enforcement.Network.Status != spec.NetworkDriftDetected || len(mf.Observation.TableDrift) != 1 ||
		len(mf.Observation.Escapes) != 1 || mf.Observation.Escapes[0].PID != 99 || mf.Observation.Escapes[0].Killed {
		t.Fatalf("status %q drift %v escapes %+v", mf.Enforcement.Network.Status, mf.Observation.TableDrift, mf.Observation.Escapes)
	}

	st, m = orphanFixture(t)
	own := spec.Manifest{OperationID: m.OperationID, Gate: spec.GateResult{Verdict: spec.VerdictPass}}
	if err := st.WriteJSON(m.OperationID, record.ManifestFile, own); err != nil {
		t.Fatal(err)
	}
	if _, err := CleanOrphans(context.Background(), st.Dir); err != nil {
		t.Fatal(err)
	}
	if err := st.ReadJSON(m.OperationID, record.ManifestFile, &mf); err != nil || mf.Gate.Verdict != spec.VerdictPass {
		t.Fatalf("the monitor's own manifest was replaced: %+v, %v", mf.Gate, err)
	}
}

func TestEscapeOf(t *testing.T) {
	for _, tc := range []struct {
		target string
		pid    int
		ok     bool
	}{
		{"pid 12 in /a/b", 12, true},
		{"pid 12 in a", 0, false},
		{"pid x in /a", 0, false},
		{"pid -1 in /a", 0, false},
		{"10.0.0.1:443", 0, false},
		{"", 0, false},
	} {
		e, ok := escapeOf(spec.Event{Target: tc.target})
		if ok != tc.ok || e.PID != tc.pid {
			t.Errorf("%q: %+v %v", tc.target, e, ok)
		}
	}
}

func TestZombie(t *testing.T) {
	for line, want := range map[string]bool{
		"123 (gensee-oci-hook) Z 1 123 123 0 -1": true,
		"123 (a) b) Z 1":                         true,
		"123 (Z) S 1 123":                        false,
		"123 (sleep) S 1":                        false,
	} {
		if got := zombie([]byte(line)); got != want {
			t.Errorf("%q: %v", line, got)
		}
	}
}
