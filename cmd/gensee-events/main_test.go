package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types"
	cdevents "github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/events/wire"
	"github.com/gensee/gensee/spec"
)

func envelope(t *testing.T, topic string, m any) *cdevents.Envelope {
	t.Helper()
	a, err := typeurl.MarshalAny(m)
	if err != nil {
		t.Fatal(err)
	}
	return &cdevents.Envelope{Namespace: "k8s.io", Topic: topic, Event: a}
}

// TestHand: an event becomes one JSON line; a foreign message is skipped
// with a warning that quotes what it names.
func TestHand(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	e := spec.Event{Kind: spec.EventEgressDenied, Control: "network", Rule: "deny_all", Target: "198.51.100.7:80/tcp", At: at,
		OperationID: "0f3a9c1d2e4b5a697887766554433221"}
	var out, warn bytes.Buffer
	enc := json.NewEncoder(&out)
	if err := hand(enc, &warn, envelope(t, events.TopicBoundary, wire.ToProto(e))); err != nil {
		t.Fatal(err)
	}
	if err := hand(enc, &warn, envelope(t, "/gensee/boundary\x1b[2J", &types.RuntimeInfo{Name: "io.containerd.runc.v2"})); err != nil {
		t.Fatal(err)
	}
	var line events.LiveLine
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line.Event == nil || *line.Event != e || line.Namespace != "k8s.io" {
		t.Fatalf("line %s: %+v %v", out.String(), line, err)
	}
	if w := warn.String(); !strings.Contains(w, `warning: skip an event on "/gensee/boundary\x1b[2J"`) {
		t.Errorf("warning %q", w)
	}
}
