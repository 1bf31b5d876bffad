package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRefusalText(t *testing.T) {
	for _, tc := range []struct {
		rf         *Refusal
		text, full string
	}{
		{Refuse("no_process", "process", "", "the spec has no process"), "no_process: the spec has no process", RefusalPrefix + "no_process: the spec has no process"},
		{Refuse("user", "--user", "drop --user", "--user %s is uid 0", "root"), "user: --user root is uid 0; drop --user", RefusalPrefix + "user: --user root is uid 0; drop --user"},
	} {
		if got := tc.rf.Text(); got != tc.text {
			t.Errorf("Text = %q, want %q", got, tc.text)
		}
		if got := tc.rf.Error(); got != tc.full {
			t.Errorf("Error = %q, want %q", got, tc.full)
		}
	}
}

func TestAsRefusal(t *testing.T) {
	rf := Refuse("catalog", "", "", "expired")
	got, ok := AsRefusal(fmt.Errorf("admit: %w", rf))
	if !ok || got != rf {
		t.Fatalf("AsRefusal(wrapped) = %v, %v", got, ok)
	}
	if _, ok := AsRefusal(errors.New("catalog: expired")); ok {
		t.Fatal("AsRefusal found a refusal in a plain error")
	}
}

func TestRefusalRecord(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	rec := Refuse("bind_source", "mounts[2].source", "bind an existing host path", "mounts[2].source /x: no such file").Record(at)
	rec.Namespace, rec.ContainerID = "default", "c1"
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"at":"2026-12-01T09:00:00Z","namespace":"default","container_id":"c1","reason":"bind_source","field":"mounts[2].source","message":"mounts[2].source /x: no such file","fix":"bind an existing host path"}`
	if string(b) != want {
		t.Fatalf("record:\n got %s\nwant %s", b, want)
	}
}

// A refusal quoting a huge input is recorded cut, so its refusals log line
// stays readable (a skipped line would hide the refusal).
func TestRefusalRecordCut(t *testing.T) {
	long := strings.Repeat("x", 75_000)
	rec := (&Refusal{Reason: "observation", Message: "PATH " + long, Fix: long}).Record(time.Now())
	if n := len(rec.Message); n > MaxRefusalText+64 || !strings.Contains(rec.Message, "characters cut") {
		t.Fatalf("message of %d bytes recorded as %d bytes: %.80q...", len(long), n, rec.Message)
	}
	if len(rec.Fix) > MaxRefusalText+64 {
		t.Fatalf("fix recorded as %d bytes", len(rec.Fix))
	}
	short := (&Refusal{Reason: "r", Message: "m", Fix: "f"}).Record(time.Now())
	if short.Message != "m" || short.Fix != "f" {
		t.Fatalf("a short refusal was changed: %+v", short)
	}
}
