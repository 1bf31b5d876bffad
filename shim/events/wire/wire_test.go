package wire

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types"
	cdevents "github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/spec"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func denied(i int) spec.Event {
	return spec.Event{
		Kind: spec.EventEgressDenied, Control: "network", Rule: "deny_all",
		Target: "198.51.100.7:80/tcp", At: t0.Add(time.Duration(i) * time.Millisecond),
		OperationID: "0f3a9c1d2e4b5a697887766554433221",
	}
}

func TestProtoRoundTrip(t *testing.T) {
	e := denied(7)
	e.Detail = "connect refused"
	e.Hint = "the contract allows only 192.0.2.10:443/tcp"
	m := ToProto(e)
	ri := m.(*types.RuntimeInfo)
	if ri.Name != "gensee.boundary/egress_denied" || ri.Annotations["target"] != e.Target {
		t.Fatalf("ToProto = %v", ri)
	}
	// As containerd carries it: marshalled to an Any and back.
	a, err := typeurl.MarshalAnyToProto(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromAny(a)
	if err != nil {
		t.Fatal(err)
	}
	if got != e {
		t.Fatalf("round trip = %+v, want %+v", got, e)
	}
}

func TestFromProtoRejects(t *testing.T) {
	for _, m := range []*types.RuntimeInfo{
		{Name: "io.containerd.runc.v2"},
		{Name: "gensee.boundary/egress_denied"}, // no control, no at
		{Name: "gensee.boundary/egress_denied", Annotations: map[string]string{"control": "network", "at": "yesterday"}},
	} {
		if _, err := FromProto(m); err == nil {
			t.Errorf("FromProto(%v) accepted", m)
		}
	}
	if _, err := FromProto(&types.Platform{}); err == nil {
		t.Error("FromProto(Platform) accepted")
	}
	if _, err := FromAny(nil); err == nil {
		t.Error("FromAny(nil) accepted")
	}
}

type fakeForwarder struct {
	topics []string
	events []cdevents.Event
}

func (p *fakeForwarder) Publish(_ context.Context, topic string, ev cdevents.Event) error {
	p.topics = append(p.topics, topic)
	p.events = append(p.events, ev)
	return nil
}

// TestPublisher: events.Publish and events.PublishFinding through the
// shim's publisher: the topics, the wire form, the redaction.
func TestPublisher(t *testing.T) {
	var f fakeForwarder
	p := Publisher(&f)
	e := denied(0)
	e.Detail = "password=hunter2"
	if err := events.Publish(context.Background(), p, e); err != nil {
		t.Fatal(err)
	}
	fi := spec.Finding{Signature: "table_tampered", Detail: "table gone", Evidence: []spec.Event{denied(1)}, At: t0}
	if err := events.PublishFinding(context.Background(), p, e.OperationID, fi); err != nil {
		t.Fatal(err)
	}
	if len(f.topics) != 2 || f.topics[0] != events.TopicBoundary || f.topics[1] != events.TopicAttention {
		t.Fatalf("topics %v", f.topics)
	}
	if d := f.events[0].(*types.RuntimeInfo).Annotations["detail"]; d != "password=[REDACTED]" {
		t.Errorf("published detail %q", d)
	}
	att := f.events[1].(*types.RuntimeInfo)
	if att.Name != "gensee.attention/control_defeat" || att.Annotations["signature"] != "table_tampered" || att.Annotations["evidence"] != "egress_denied 198.51.100.7:80/tcp" {
		t.Errorf("finding published as %v", att)
	}
}

// TestShimPublisherFits: containerd's shim publisher is a Forwarder; none
// is no Publisher (events.Publish then publishes nowhere).
func TestShimPublisherFits(t *testing.T) {
	var _ Forwarder = cdevents.Publisher(nil)
	if p := Publisher(nil); p != nil {
		t.Errorf("Publisher(nil) = %v, want nil", p)
	}
}

func envelope(t *testing.T, topic string, m any) *cdevents.Envelope {
	t.Helper()
	a, err := typeurl.MarshalAny(m)
	if err != nil {
		t.Fatal(err)
	}
	return &cdevents.Envelope{Timestamp: t0, Namespace: "k8s.io", Topic: topic, Event: a}
}

// TestLine: what a subscription delivers becomes the line the CLI prints:
// an event (sanitized), an attention; a foreign message is refused.
func TestLine(t *testing.T) {
	e := denied(2)
	e.Detail = "token=abc"
	got, err := Line(envelope(t, events.TopicBoundary, ToProto(e)))
	if err != nil || got.Event == nil || got.Event.Kind != spec.EventEgressDenied || got.Namespace != "k8s.io" || got.Event.Detail != "token=[REDACTED]" {
		t.Fatalf("event line %+v %v", got, err)
	}
	fi := spec.Finding{Signature: "deny_then_reach", Detail: "reached", Evidence: []spec.Event{denied(1)}, At: t0}
	got, err = Line(envelope(t, events.TopicAttention, FindingToProto(e.OperationID, fi)))
	if err != nil || got.Attention == nil || got.Attention.Signature != "deny_then_reach" || got.Attention.OperationID != e.OperationID ||
		got.Attention.Evidence != "egress_denied 198.51.100.7:80/tcp" || !got.Attention.At.Equal(t0) {
		t.Fatalf("attention line %+v %v", got, err)
	}
	if _, err := Line(envelope(t, events.TopicBoundary, FindingToProto(e.OperationID, fi))); err == nil {
		t.Error("an attention on the boundary topic accepted")
	}
	if _, err := Line(envelope(t, events.TopicAttention, ToProto(e))); err == nil {
		t.Error("an event on the attention topic accepted")
	}
}
