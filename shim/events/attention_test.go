package events

import (
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
	list, err := ListAttention(s)
	if err != nil || len(list) != 1 || list[0].OperationID != opA {
		t.Fatalf("ListAttention = %+v, %v", list, err)
	}
	had, err := ClearAttention(s, opA)
	if err != nil || !had {
		t.Fatalf("ClearAttention = %v, %v", had, err)
	}
	if had, err := ClearAttention(s, opA); err != nil || had {
		t.Fatalf("second ClearAttention = %v, %v", had, err)
	}
	if list, _ := ListAttention(s); len(list) != 0 {
		t.Fatalf("still listed: %+v", list)
	}
	dir, _ := s.OperationDir(opA)
	if _, err := os.Stat(filepath.Join(dir, AttentionFile)); !os.IsNotExist(err) {
		t.Errorf("attention file after clear: %v", err)
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
