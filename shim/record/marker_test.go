package record

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

type testMarker struct {
	OperationID string `json:"operation_id"`
	Dead        bool   `json:"dead"`
}

func (m testMarker) Operation() string { return m.OperationID }
func (m testMarker) Orphaned() bool    { return m.Dead }

func TestCleanOrphans(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if got, err := CleanOrphans(s, "runs", func(testMarker) error { return nil }); got != nil || err != nil {
		t.Fatalf("no directory: %v %v", got, err)
	}
	opC := "0000000000000000000000000000000c"
	for _, m := range []testMarker{{opA, true}, {opB, false}, {opC, true}} {
		if err := s.WriteMarker("runs", m.OperationID, m); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(s.Dir, "runs")
	os.WriteFile(filepath.Join(dir, opA+".sock"), nil, 0o600)                  // not a marker
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o600)           // undecodable
	os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{"dead":true}`), 0o600) // no operation id
	boom := errors.New("boom")
	var called []string
	got, err := CleanOrphans(s, "runs", func(m testMarker) error {
		called = append(called, m.OperationID)
		if m.OperationID == opC {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want the failed clean's", err)
	}
	if !slices.Equal(got, []string{opA}) || !slices.Equal(called, []string{opA, opC}) {
		t.Errorf("cleaned %v, called for %v; want [%s] and [%s %s]", got, called, opA, opA, opC)
	}
}

func TestMarkCleaned(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := s.MarkCleaned(opA, "by a test"); err != nil {
		t.Fatalf("operation directory gone: %v, want nothing done", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "operations")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MarkCleaned created the operation: %v", err)
	}
	dir, err := s.CreateOperation(opA, "default", "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkCleaned(opA, "by a test"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, CleanedMarker)); err != nil || string(b) != "by a test\n" {
		t.Errorf("cleaned marker %q, %v", b, err)
	}
	if err := s.MarkCleaned("../x", ""); err == nil {
		t.Error("malformed id accepted")
	}
}

func TestRemoveMarker(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := s.WriteMarker("runs", opA, testMarker{OperationID: opA}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveMarker("runs", opA); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "runs", opA+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker left: %v", err)
	}
	if err := s.RemoveMarker("runs", opA); err != nil {
		t.Errorf("a marker already gone: %v", err)
	}
}
