package service

import (
	"testing"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// TestMarkerNamesTable checks the marker the boundary writes before its
// table exists (engine.BindSpec.Mark; the engine's TestBindOrder checks
// it comes first): it names the table, its netns and the init, so a shim
// killed right after the install leaves what `shim delete`'s cleanup
// reads (cleanupBundle: ReadBundleMark, the operation's cleaned marker,
// the recorded netns); and one that cannot be written is an error, which
// refuses the bind with no table.
func TestMarkerNamesTable(t *testing.T) {
	bundle, state := t.TempDir(), t.TempDir()
	op := &operation{id: "0123456789abcdef0123456789abcdef", bundle: bundle, cfg: config.Config{StateDir: state},
		admission: &spec.Admission{Netns: spec.NetnsHost, Subject: &spec.Subject{InitPID: 4242, StartTime: 99}}}
	if err := op.markTable("gensee_0123456789ab"); err != nil {
		t.Fatal(err)
	}
	m, found, err := record.ReadBundleMark(bundle)
	if err != nil || !found {
		t.Fatalf("no bundle marker (found %v, %v)", found, err)
	}
	if m.Table != "gensee_0123456789ab" || m.OperationID != op.id || m.StateDir != state || m.Netns != spec.NetnsHost || m.InitPID != 4242 || m.StartTime != 99 {
		t.Errorf("marker %+v does not name the table, the operation, its netns and init", m)
	}
	if cleaned, err := m.Cleaned(); err != nil || cleaned {
		t.Errorf("the marker's operation reads as cleaned (%v, %v): cleanup would skip the table", cleaned, err)
	}
	op.bundle = bundle + "/missing"
	if err := op.markTable("gensee_0123456789ab"); err == nil {
		t.Fatal("an unwritable marker was no error")
	}
}
