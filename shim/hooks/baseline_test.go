package hooks

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
)

// TestGateBaseline: podman's /etc/mtab, in the upperdir before bind took
// the baseline, is not the workload's: the gate passes under unclaimed
// "fail" and counts it as excluded. Rewritten by the workload (ln -sf),
// it is an unclaimed change. Without baseline.json the gate fails rather
// than guess.
func TestGateBaseline(t *testing.T) {
	op, upper := gateOperation(t)
	st, id := op.store, op.req.OperationID
	mtab := filepath.Join(upper, "etc", "mtab")
	must(t, os.MkdirAll(filepath.Dir(mtab), 0o755))
	must(t, os.Symlink("/proc/mounts", mtab))
	must(t, op.takeBaseline(context.Background()))
	time.Sleep(gate.FreshSlack + 10*time.Millisecond)
	op.ready = time.Now()

	o := op.gate().Run(context.Background(), op.ready)
	if o.Err != nil || o.Res == nil || o.Res.Verdict != gate.Pass || o.Res.Unclaimed.Count != 0 || o.Res.Excluded.Baseline != 2 {
		t.Fatalf("podman's /etc/mtab untouched: %+v (result %+v)", o, o.Res)
	}

	must(t, os.Remove(mtab))
	must(t, os.Symlink("/proc/mounts", mtab))
	o = op.gate().Run(context.Background(), op.ready)
	if o.Err != nil || o.Res == nil || o.Res.Verdict != gate.Fail || o.Res.Unclaimed.Count != 2 { // /etc and /etc/mtab
		t.Fatalf("/etc/mtab rewritten by the workload: %+v (result %+v)", o, o.Res)
	}

	dir, err := st.OperationDir(id)
	must(t, err)
	must(t, os.Remove(filepath.Join(dir, record.BaselineFile)))
	if o := op.gate().Run(context.Background(), op.ready); o.Err == nil {
		t.Fatalf("no baseline.json: %+v, want a gate error", o)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
