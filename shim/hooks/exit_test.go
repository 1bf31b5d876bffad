package hooks

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// A contract's unclaimed "fail" holds under OCI hooks as under the shim:
// a change outside every product fails the gate, and without a diff to
// read the gate fails rather than not running.
func TestRunGateFailUnclaimed(t *testing.T) {
	op, upper := gateOperation(t)
	adm := op.adm
	op.ready = time.Now().Add(-time.Minute)
	if err := op.takeBaseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "stray"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := op.gate().Run(context.Background(), op.ready)
	res := o.Res
	if o.Err != nil || !o.Ran || res == nil || res.Verdict != gate.Fail {
		t.Fatalf("gate: %+v", o)
	}
	found := false
	for _, a := range res.Anomalies {
		found = found || a.Rule == gate.RuleUnclaimedChange
	}
	if !found {
		t.Fatalf("no %s anomaly: %+v", gate.RuleUnclaimedChange, res.Anomalies)
	}
	adm.Diff = diffSource{Problem: "no overlay"}
	if o := op.gate().Run(context.Background(), op.ready); !o.Ran || o.Err == nil {
		t.Fatalf("no diff under unclaimed fail: %+v, want a failed gate", o)
	}
}

// gateOperation is an operation of this door with a recorded operation,
// an empty upperdir (returned) over an empty lower dir, and a contract
// whose unclaimed changes fail the gate.
func gateOperation(t *testing.T) (*operation, string) {
	t.Helper()
	st := record.Store{Dir: t.TempDir()}
	id := "0123456789abcdef0123456789abcdef"
	if _, err := st.CreateOperation(id, Namespace, "c1"); err != nil {
		t.Fatal(err)
	}
	upper, lower := t.TempDir(), t.TempDir()
	adm := &admissionRecord{Diff: diffSource{Upper: upper, Lowers: []string{lower}}}
	adm.Contract = spec.Contract{ID: "c", Unclaimed: spec.UnclaimedFail}
	return &operation{req: MonitorRequest{OperationID: id}, store: st, adm: adm, log: log.L}, upper
}
