package events

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

func storeT(t *testing.T, ids ...string) record.Store {
	t.Helper()
	s := record.Store{Dir: t.TempDir()}
	for _, id := range ids {
		if _, err := s.CreateOperation(id, "default", "c-"+id[:4]); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

const (
	opA = "0f3a9c1d2e4b5a697887766554433221"
	opB = "1f3a9c1d2e4b5a697887766554433221"
)

func TestAttention(t *testing.T) {
	s := storeT(t, opA, opB)
	if _, ok, err := ReadAttention(s, opA); ok || err != nil {
		t.Fatalf("fresh operation flagged: %v %v", ok, err)
	}
	f1 := spec.Finding{Signature: "deny_then_reach", Detail: "reached with token=abc", Evidence: []spec.Event{denied(0)}, At: t0}
	f2 := spec.Finding{Signature: "table_tampered", Detail: "table gone", At: t0.Add(1)}
	if _, err := RaiseAttention(s, opA, f1); err != nil {
		t.Fatal(err)
	}
	a, err := RaiseAttention(s, opA, f2)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != spec.AttentionControlDefeat || len(a.Findings) != 2 || a.Findings[0].Signature != "deny_then_reach" {
		t.Fatalf("attention = %+v (a later finding must not replace the first)", a)
	}
	if a.Findings[0].Detail != "reached with token=[REDACTED]" {
		t.Errorf("detail not redacted: %q", a.Findings[0].Detail)
	}
	list, err := ListAttention(s, false)
	if err != nil || len(list) != 1 || list[0].OperationID != opA {
		t.Fatalf("ListAttention = %+v, %v", list, err)
	}
	by := spec.Clearing{By: "uid 0 (root)", At: t0.Add(5), Note: "looked: token=abc"}
	n, err := ClearAttention(s, opA, by)
	if err != nil || n != 2 {
		t.Fatalf("ClearAttention = %v, %v", n, err)
	}
	if n, err := ClearAttention(s, opA, by); err != nil || n != 0 {
		t.Fatalf("second ClearAttention = %v, %v", n, err)
	}
	if list, _ := ListAttention(s, false); len(list) != 0 {
		t.Fatalf("still listed as open: %+v", list)
	}
	// The history stays: both findings, each with who cleared it.
	all, _ := ListAttention(s, true)
	if len(all) != 1 || len(all[0].Findings) != 2 || all[0].Findings[1].Cleared == nil ||
		all[0].Findings[1].Cleared.By != "uid 0 (root)" || all[0].Findings[1].Cleared.Note != "looked: token=[REDACTED]" {
		t.Fatalf("after clear, --all = %+v", all)
	}
	// A later finding is open again; the earlier clearing stays.
	if _, err := RaiseAttention(s, opA, spec.Finding{Signature: "table_tampered", At: t0.Add(9)}); err != nil {
		t.Fatal(err)
	}
	a, _, _ = ReadAttention(s, opA)
	if len(a.Open()) != 1 || len(a.Findings) != 3 || a.Findings[0].Cleared == nil {
		t.Fatalf("after a later finding: %+v", a)
	}
	if fs, err := Findings(s, opA); err != nil || len(fs) != 3 {
		t.Fatalf("Findings = %d, %v", len(fs), err)
	}
}

// TestClearDamagedAttention: a record that does not parse is kept aside,
// and the operation no longer reads as needing attention.
func TestClearDamagedAttention(t *testing.T) {
	s := storeT(t, opA)
	dir, _ := s.OperationDir(opA)
	if err := os.WriteFile(filepath.Join(dir, AttentionFile), []byte(`{"state": "control_defeat", "findings": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := ClearAttention(s, opA, spec.Clearing{By: "uid 0"})
	if n != 1 || !errors.Is(err, ErrAttentionDamaged) {
		t.Fatalf("ClearAttention = %d, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, DamagedAttentionFile)); err != nil {
		t.Errorf("damaged record not kept: %v", err)
	}
	if _, ok, err := ReadAttention(s, opA); ok || err != nil {
		t.Errorf("after clear: %v %v", ok, err)
	}
}

// TestAttentionConcurrentRaise: raises under the lock never lose a finding.
func TestAttentionConcurrentRaise(t *testing.T) {
	s := storeT(t, opA)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := RaiseAttention(s, opA, spec.Finding{Signature: "table_tampered", At: t0}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	a, ok, err := ReadAttention(s, opA)
	if !ok || err != nil || len(a.Findings) != 8 {
		t.Fatalf("after 8 raises: %d findings, %v %v", len(a.Findings), ok, err)
	}
}

func TestAttentionBadID(t *testing.T) {
	s := storeT(t)
	if _, err := RaiseAttention(s, "../x", spec.Finding{}); err == nil {
		t.Fatal("malformed id accepted")
	}
}

func TestRow(t *testing.T) {
	e := denied(0)
	e.Detail = "connect refused"
	e.Hint = "ask for allow_exact"
	r := Row(e)
	for _, want := range []string{"egress_denied", "network/deny_all", "198.51.100.7:80/tcp", "connect refused", "(hint: ask for allow_exact)"} {
		if !strings.Contains(r, want) {
			t.Errorf("Row = %q lacks %q", r, want)
		}
	}
}
