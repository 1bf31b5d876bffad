package record

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const (
	opA = "0000000000000000000000000000000a"
	opB = "0000000000000000000000000000000b"
)

func TestIndexAndUnindex(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if _, err := s.CreateOperation(opA, "default", "job"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOperation(opB, "default", "job"); err != nil { // the id reused: newest wins
		t.Fatal(err)
	}
	idx, err := s.Index()
	if err != nil || !slices.Equal(idx, []IndexEntry{{"default", "job", opB}}) {
		t.Fatalf("index %v, %v", idx, err)
	}
	if ok, err := s.Unindex("default", "job", opA); ok || err != nil {
		t.Fatalf("unindexing the older operation removed the newer entry: %v %v", ok, err)
	}
	if ok, err := s.Unindex("default", "job", opB); !ok || err != nil {
		t.Fatalf("unindex: %v %v", ok, err)
	}
	if _, err := s.Lookup("default", "job"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lookup after unindex: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(s.Dir, "index", "default"))
	if len(ents) != 0 {
		t.Fatalf("left in the index dir: %v", ents)
	}
}

func TestRemoveOperation(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	dir, err := s.CreateOperation(opA, "default", "job")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, StagedDir, "out"), 0o700)
	os.WriteFile(filepath.Join(dir, StagedDir, "out", "f"), []byte("x"), 0o400)
	if err := s.RemoveOperation(opA); err != nil {
		t.Fatal(err)
	}
	ids, _ := s.Operations()
	ents, _ := os.ReadDir(filepath.Join(s.Dir, "operations"))
	if len(ids) != 0 || len(ents) != 0 {
		t.Fatalf("left %v %v", ids, ents)
	}
	// A leftover of a crash mid-removal is not listed and is swept.
	os.MkdirAll(filepath.Join(s.Dir, "operations", trashPrefix+opB, "staged"), 0o700)
	if ids, _ := s.Operations(); len(ids) != 0 {
		t.Fatalf("a removal under way is listed: %v", ids)
	}
	if err := s.SweepTrash(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir, "operations")); len(ents) != 0 {
		t.Fatalf("sweep left %v", ents)
	}
}

func TestAppendRefusal(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "state")}
	for range 3 {
		if err := s.AppendRefusal(map[string]string{"reason": "r"}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(s.RefusalsPath())
	if err != nil || string(b) != `{"reason":"r"}`+"\n"+`{"reason":"r"}`+"\n"+`{"reason":"r"}`+"\n" {
		t.Fatalf("%q %v", b, err)
	}
	fi, _ := os.Stat(s.RefusalsPath())
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}
