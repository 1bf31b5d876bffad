package service

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// TestTakeBaseline: bind's baseline of an overlay upperdir reaches the gate
// helper's input, encoded as the helper reads it; a bind layout and a task
// without a diff take none; an upperdir past the bound is a refusal.
func TestTakeBaseline(t *testing.T) {
	upper := t.TempDir()
	if err := os.WriteFile(filepath.Join(upper, "left-by-an-earlier-run"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	op := &operation{id: "0123456789abcdef0123456789abcdef", store: record.Store{Dir: t.TempDir()},
		diff: diffSource{Upper: upper, Lowers: []string{t.TempDir()}}}
	if err := op.takeBaseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	if op.baseline == nil || len(op.baseline.Entries) != 1 || op.baseline.Entries[0].Path != "left-by-an-earlier-run" {
		t.Fatalf("baseline %+v", op.baseline)
	}
	in, err := (&helperGate{op: op}).input(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var got gate.Input
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got.Baseline, op.baseline) {
		t.Fatalf("the helper's input carries baseline %+v (%v), want %+v", got.Baseline, err, op.baseline)
	}

	for _, d := range []diffSource{{Root: t.TempDir()}, {Problem: "rootfs has 2 mounts"}} {
		op := &operation{diff: d}
		if err := op.takeBaseline(context.Background()); err != nil || op.baseline != nil {
			t.Fatalf("%+v: baseline %+v, %v; want none", d, op.baseline, err)
		}
	}

	for i := range gate.MaxBaselineEntries / 64 {
		d := filepath.Join(upper, fmt.Sprintf("d%02d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 64 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprint(j)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	op = &operation{diff: diffSource{Upper: upper}}
	rf, ok := spec.AsRefusal(op.takeBaseline(context.Background()))
	if !ok || rf.Reason != "rootfs_reused" || op.baseline != nil {
		t.Fatalf("%d entries: %v, want a rootfs_reused refusal", gate.MaxBaselineEntries+64+1, rf)
	}
}
