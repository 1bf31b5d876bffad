package hostrun

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gensee/gensee/shim/record"
)

// TestRemoveLeftoversRecord: an orphan whose admission.json was never put
// in place (its command never got the go) leaves no record; one whose
// admission is in place keeps its record, marked cleaned. The marker goes
// in both cases.
func TestRemoveLeftoversRecord(t *testing.T) {
	dir := t.TempDir()
	st := record.Store{Dir: dir}
	for _, admitted := range []bool{false, true} {
		id, err := record.NewOperationID()
		if err != nil {
			t.Fatal(err)
		}
		op, err := st.MakeOperationDir(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.IndexOperation(Namespace, id, id); err != nil {
			t.Fatal(err)
		}
		if admitted {
			if err := st.WriteJSON(id, record.AdmissionFile, map[string]string{"table": "gensee_x"}); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(filepath.Join(op, ".admission.json.tmp-1"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		m := marker{OperationID: id}
		if err := writeMarker(dir, m); err != nil {
			t.Fatal(err)
		}
		if err := removeLeftovers(context.Background(), dir, m); err != nil {
			t.Fatal(err)
		}
		_, opErr := os.Stat(op)
		_, cleanedErr := os.Stat(filepath.Join(op, record.CleanedMarker))
		found, _ := st.Lookup(Namespace, id)
		switch {
		case !admitted && (opErr == nil || found != ""):
			t.Errorf("never went: record kept (%v) or still indexed (%q)", opErr, found)
		case admitted && (opErr != nil || cleanedErr != nil || found == ""):
			t.Errorf("admitted: record %v, cleaned mark %v, indexed %q; want kept, marked and indexed", opErr, cleanedErr, found)
		}
		if _, err := os.Stat(filepath.Join(dir, runsDir, id+".json")); err == nil {
			t.Errorf("marker of %s kept", id)
		}
	}
}
