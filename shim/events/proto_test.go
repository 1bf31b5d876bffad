package events

import (
	"context"
	"testing"

	"github.com/containerd/containerd/api/types"
	cdevents "github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"

	"github.com/gensee/gensee/spec"
)

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

type fakePublisher struct {
	topics []string
	events []cdevents.Event
}

func (p *fakePublisher) Publish(_ context.Context, topic string, ev cdevents.Event) error {
	p.topics = append(p.topics, topic)
	p.events = append(p.events, ev)
	return nil
}

func TestPublish(t *testing.T) {
	var p fakePublisher
	e := denied(0)
	e.Detail = "password=hunter2"
	if err := Publish(context.Background(), &p, e); err != nil {
		t.Fatal(err)
	}
	f := spec.Finding{Signature: "table_tampered", Detail: "table gone", Evidence: []spec.Event{denied(1)}, At: t0}
	if err := PublishFinding(context.Background(), &p, e.OperationID, f); err != nil {
		t.Fatal(err)
	}
	if len(p.topics) != 2 || p.topics[0] != TopicBoundary || p.topics[1] != TopicAttention {
		t.Fatalf("topics %v", p.topics)
	}
	if d := p.events[0].(*types.RuntimeInfo).Annotations["detail"]; d != "password=[REDACTED]" {
		t.Errorf("published detail %q", d)
	}
	att := p.events[1].(*types.RuntimeInfo)
	if att.Name != "gensee.attention/control_defeat" || att.Annotations["signature"] != "table_tampered" || att.Annotations["evidence"] != "egress_denied 198.51.100.7:80/tcp" {
		t.Errorf("finding published as %v", att)
	}
}

// TestShimPublisherFits: containerd's shim publisher satisfies Publisher.
func TestShimPublisherFits(t *testing.T) {
	var _ Publisher = cdevents.Publisher(nil)
}
