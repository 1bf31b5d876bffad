package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/record"
)

// stateFixture is a state dir with several operation records laid out as
// the runtime writes them, and an operator config (root-owned, as the
// runtime requires) naming it with the given [retention] keys.
type stateFixture struct {
	state, config string
	st            record.Store
	n             int
}

func newStateFixture(t *testing.T, retention string) *stateFixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the operator config must be root-owned")
	}
	f := &stateFixture{state: t.TempDir()}
	f.st = record.Store{Dir: f.state}
	f.config = writeFile(t, t.TempDir(), "config.toml", "state_dir = \""+f.state+"\"\n"+retention)
	return f
}

type recSpec struct {
	ns, container, contract, verdict string
	age                              time.Duration // since testNow it finished; < 0: running
	deleted, attention               bool
}

func (f *stateFixture) add(t *testing.T, s recSpec) string {
	t.Helper()
	f.n++
	id := fmt.Sprintf("%032x", 0xa0+f.n)
	dir, err := f.st.CreateOperation(id, s.ns, s.container)
	if err != nil {
		t.Fatal(err)
	}
	created := testNow.Add(-s.age - time.Hour)
	if s.age < 0 {
		created = testNow.Add(-10 * time.Minute)
	}
	adm := map[string]any{"operation_id": id, "namespace": s.ns, "container_id": s.container, "contract_id": s.contract, "created_at": created}
	if err := f.st.WriteJSON(id, record.AdmissionFile, adm); err != nil {
		t.Fatal(err)
	}
	if s.age >= 0 {
		m := map[string]any{"operation_id": id, "contract": map[string]any{"id": s.contract}, "gate": map[string]any{"verdict": s.verdict}}
		if err := f.st.WriteJSON(id, record.ManifestFile, m); err != nil {
			t.Fatal(err)
		}
		at := testNow.Add(-s.age)
		if err := os.Chtimes(filepath.Join(dir, record.ManifestFile), at, at); err != nil {
			t.Fatal(err)
		}
	}
	if s.deleted {
		writeFile(t, dir, record.CleanedMarker, "")
	}
	if s.attention {
		writeFile(t, dir, record.AttentionFile, `{"operation_id":"`+id+`","state":"control_defeat","findings":[{"signature":"table_tampered","detail":"table gone","evidence":[],"at":"2026-12-01T10:00:00Z"}]}`+"\n")
	}
	return id
}

func (f *stateFixture) run(t *testing.T, args ...string) result {
	t.Helper()
	return std().run(t, append(args, "--config", f.config)...)
}

func (f *stateFixture) exists(id string) bool {
	dir, _ := f.st.OperationDir(id)
	_, err := os.Lstat(dir)
	return err == nil
}
