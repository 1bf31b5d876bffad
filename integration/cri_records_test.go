package integration

import (
	"os"
	"path/filepath"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// record reads an operation record of CRI container id.
func (e *criEnv) record(id, file string) map[string]any {
	e.t.Helper()
	st := record.Store{Dir: e.state}
	op, err := st.Lookup(criNS, id)
	must(e.t, err)
	var m map[string]any
	must(e.t, st.ReadJSON(op, file, &m))
	return m
}

// manifestOf reads the effect manifest of CRI container id strictly; nil
// (and an error) if there is none.
func (e *criEnv) manifestOf(id string) *spec.Manifest {
	t := e.t
	st := record.Store{Dir: e.state}
	op, err := st.Lookup(criNS, id)
	must(t, err)
	dir, err := st.OperationDir(op)
	must(t, err)
	b, err := os.ReadFile(filepath.Join(dir, record.ManifestFile))
	if err != nil {
		t.Errorf("container %s: no effect manifest after exit: %v", id, err)
		return nil
	}
	m, err := spec.ParseManifest(b)
	if err != nil {
		t.Errorf("container %s: manifest: %v", id, err)
		return nil
	}
	return m
}

// checkManifest: the manifest of an exited CRI container names the
// admitted contract and the safe_default fallback, and its host-netns table
// was deleted.
func (e *criEnv) checkManifest(id, contract string) {
	m := e.manifestOf(id)
	if m == nil {
		return
	}
	if m.Contract.ID != contract || !m.Inference.SafeDefault || m.Promoted || m.SemanticallyVerified {
		e.t.Errorf("container %s: manifest contract %q safe_default %v promoted %v, want %s by safe_default, not promoted",
			id, m.Contract.ID, m.Inference.SafeDefault, m.Promoted, contract)
	}
	if m.Enforcement.Network.TableRemoved != "deleted" {
		e.t.Errorf("container %s: table %s removed %q, want deleted", id, m.Enforcement.Network.Table, m.Enforcement.Network.TableRemoved)
	}
}
