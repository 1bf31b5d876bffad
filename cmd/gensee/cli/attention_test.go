package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
)

func TestAttentionListClear(t *testing.T) {
	fx := newOpFixture(t)
	store := record.Store{Dir: fx.state}
	fx.run(t, "attention", "list").want(t, ExitOK, []string{"no operation needs attention"}, nil)
	if r := fx.run(t, "attention", "list", "--json"); r.code != ExitOK || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("empty list --json = %d %q", r.code, r.stdout)
	}
	f := defeatFinding(evAt)
	f.Detail += " with token=hunter2"
	if _, err := events.RaiseAttention(store, fxOperation, f); err != nil {
		t.Fatal(err)
	}
	r := fx.run(t, "attention", "list")
	r.want(t, ExitOK, []string{"OPERATION", "EVIDENCE", fxOperation, fxNamespace + "/" + fxContainer, "deny_then_reach",
		"was later reached", "token=[REDACTED]"}, nil)
	if strings.Contains(r.stdout, "hunter2") {
		t.Errorf("secret listed:\n%s", r.stdout)
	}

	r = fx.run(t, "attention", "list", "--json")
	var items []AttentionItem
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
		t.Fatalf("list --json: %v\n%s", err, r.stdout)
	}
	if len(items) != 1 || items[0].OperationID != fxOperation || items[0].Container != fxNamespace+"/"+fxContainer ||
		items[0].State != "control_defeat" || len(items[0].Findings) != 1 || items[0].Findings[0].Evidence != 2 ||
		!items[0].Findings[0].At.Equal(evAt) {
		t.Errorf("list --json = %+v", items)
	}

	fx.run(t, "attention", "clear", "--operation", fxOperation, "--note", "false alarm: a test").want(t, ExitOK,
		[]string{"cleared attention on operation " + fxOperation + " (" + fxNamespace + "/" + fxContainer + "): 1 finding", "deny_then_reach  2 evidence"}, nil)
	fx.run(t, "attention", "clear", "--operation", fxOperation).want(t, ExitRefused, nil, []string{"no finding is open", "gensee attention list"})
	fx.run(t, "attention", "list").want(t, ExitOK, []string{"no operation needs attention"}, nil)
	// The finding and its clearing stay: --all lists them.
	r = fx.run(t, "attention", "list", "--all", "--json")
	items = nil
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
		t.Fatalf("list --all --json: %v\n%s", err, r.stdout)
	}
	if len(items) != 1 || len(items[0].Findings) != 1 || items[0].Findings[0].Cleared == nil ||
		!strings.HasPrefix(items[0].Findings[0].Cleared.By, "uid ") || items[0].Findings[0].Cleared.Note != "false alarm: a test" {
		t.Errorf("list --all --json = %+v", items)
	}
	fx.run(t, "attention", "list", "--all").want(t, ExitOK, []string{"CLEARED", "deny_then_reach", " by uid "}, nil)
	fx.run(t, "attention", "list", "--all", "--since", "876000h").want(t, ExitOK, []string{"deny_then_reach"}, nil)
	fx.run(t, "attention", "clear", "--operation", strings.Repeat("e", 32)).want(t, ExitUsage, nil, []string{"no directory"})
}

// TestAttentionDamaged: a damaged attention.json is reported (exit 2) by
// the readers, and a person can still clear it.
func TestAttentionDamaged(t *testing.T) {
	fx := newOpFixture(t)
	writeFile(t, fx.dir, events.AttentionFile, `{"state": "control_defeat", "findings": [`)
	fx.run(t, "attention", "list").want(t, ExitUsage, nil, []string{"list attention in state dir"})
	fx.run(t, "boundary", "audit", "--operation", fxOperation).want(t, ExitUsage, nil, []string{"read attention of operation " + fxOperation})
	fx.run(t, "attention", "clear", "--operation", fxOperation).want(t, ExitOK, []string{"cleared attention on operation " + fxOperation, "did not parse", events.DamagedAttentionFile}, nil)
	fx.run(t, "attention", "list").want(t, ExitOK, []string{"no operation needs attention"}, nil)
}
