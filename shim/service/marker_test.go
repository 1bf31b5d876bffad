package service

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/monitor"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// errKilled stands for the shim's death right after the table install.
var errKilled = errors.New("killed after the table install")

// TestMarkerBeforeTable checks, through the install seam, that the bundle
// marker naming the table, its netns and the init is on disk when the
// table is installed, so a shim killed right after the install leaves
// what `shim delete`'s cleanup reads (cleanupBundle: ReadBundleMark, the
// operation's cleaned marker, the recorded netns); and that a marker that
// cannot be written refuses the bind with no install.
func TestMarkerBeforeTable(t *testing.T) {
	saved := installTable
	t.Cleanup(func() { installTable = saved })
	bundle, state := t.TempDir(), t.TempDir()
	op := &operation{id: "0123456789abcdef0123456789abcdef", bundle: bundle, cfg: config.Config{StateDir: state},
		admission: &spec.Admission{Netns: "host"}, net: &netBoundary{log: log.L}}
	plan := &netpolicy.Plan{Table: "gensee_0123456789ab"}
	sub := &spec.Subject{InitPID: 4242, StartTime: 99}
	installed := 0
	installTable = func(_ *netBoundary, _ context.Context, _ *os.File, p *netpolicy.Plan, _ *monitor.Monitor) error {
		installed++
		m, found, err := record.ReadBundleMark(bundle)
		if err != nil || !found {
			t.Fatalf("the table is installed with no bundle marker (found %v, %v)", found, err)
		}
		if m.Table != p.Table || m.OperationID != op.id || m.StateDir != state || m.Netns != "host" || m.InitPID != 4242 || m.StartTime != 99 {
			t.Errorf("marker %+v does not name the table %s, the operation, its netns and init", m, p.Table)
		}
		if cleaned, err := m.Cleaned(); err != nil || cleaned {
			t.Errorf("the marker's operation reads as cleaned (%v, %v): cleanup would skip the table", cleaned, err)
		}
		return errKilled
	}
	if err := op.markThenInstall(context.Background(), nil, plan, nil, sub); !errors.Is(err, errKilled) || installed != 1 {
		t.Fatalf("markThenInstall: %v after %d installs", err, installed)
	}

	// A bundle the marker cannot be written to: no table.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(state+"/operations/"+op.id, 0o700); err != nil {
		t.Fatal(err)
	}
	mon, err := monitor.Open(monitor.Config{OperationID: op.id, Store: record.Store{Dir: state}, Ctx: context.Background(), Logger: log.L}, plan)
	if err != nil {
		t.Fatal(err)
	}
	op.bundle = bundle + "/missing"
	installed = 0
	if err := op.markThenInstall(context.Background(), f, plan, mon, sub); err == nil || installed != 0 {
		t.Fatalf("an unwritable marker: %v after %d installs, want a refusal before any", err, installed)
	}
}
