// Package wire carries gensee's events over containerd's event service: the
// mapping to and from the message published, and the shim's publisher as an
// events.Publisher. Only the shim (which publishes) and gensee-events (which
// subscribes, for `gensee events --follow`) link it: containerd's protobuf
// types stay out of the CLI, host runs and the OCI hook, whose every start
// would pay their initialisation.
package wire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/api/types"
	cdevents "github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/spec"
)

// Forwarder is the one method of containerd's shim publisher gensee uses;
// shim.Publisher satisfies it.
type Forwarder interface {
	Publish(ctx context.Context, topic string, event cdevents.Event) error
}

// Publisher publishes a door's events and findings through f, onto
// containerd's event service; a nil f publishes nowhere (nil).
func Publisher(f Forwarder) events.Publisher {
	if f == nil {
		return nil
	}
	return forwarder{f}
}

type forwarder struct{ f Forwarder }

func (p forwarder) PublishEvent(ctx context.Context, e spec.Event) error {
	return p.f.Publish(ctx, events.TopicBoundary, ToProto(e))
}

func (p forwarder) PublishFinding(ctx context.Context, opID string, f spec.Finding) error {
	return p.f.Publish(ctx, events.TopicAttention, FindingToProto(opID, f))
}

// The wire mapping. `ctr events` prints only event types it links, so an
// event travels as containerd.types.RuntimeInfo, which it does:
//
//	Name:        "gensee.boundary/<kind>"
//	Annotations: control, rule, detail, target, at (RFC 3339, nanoseconds),
//	             operation_id, hint — each only when set
//
// A finding on /gensee/attention travels the same way with Name
// "gensee.attention/control_defeat" and annotations operation_id, signature,
// detail, at, evidence (one "kind target" per evidence event, "; "-joined).
// Version, Options and Features stay empty. The mapping hides behind
// ToProto/FromProto so a dedicated proto type can replace it.
const (
	boundaryPrefix  = "gensee.boundary/"
	attentionPrefix = "gensee.attention/"
	runtimeInfoURL  = "containerd.types.RuntimeInfo"
)

// ToProto maps a (sanitized) event to the message published on
// events.TopicBoundary.
func ToProto(e spec.Event) proto.Message {
	a := map[string]string{}
	put := func(k, v string) {
		if v != "" {
			a[k] = v
		}
	}
	put("control", e.Control)
	put("rule", e.Rule)
	put("detail", e.Detail)
	put("target", e.Target)
	if !e.At.IsZero() {
		a["at"] = e.At.UTC().Format(time.RFC3339Nano)
	}
	put("operation_id", e.OperationID)
	put("hint", e.Hint)
	return &types.RuntimeInfo{Name: boundaryPrefix + e.Kind, Annotations: a}
}

// FromProto recovers an event from a message ToProto made. It rejects
// other messages, including RuntimeInfo that is not a gensee event.
func FromProto(m proto.Message) (spec.Event, error) {
	ri, ok := m.(*types.RuntimeInfo)
	if !ok {
		return spec.Event{}, fmt.Errorf("decode boundary event: %T is not %s", m, runtimeInfoURL)
	}
	kind, ok := strings.CutPrefix(ri.GetName(), boundaryPrefix)
	if !ok {
		return spec.Event{}, fmt.Errorf("decode boundary event: name %q lacks %q", ri.GetName(), boundaryPrefix)
	}
	a := ri.GetAnnotations()
	e := spec.Event{
		Kind: kind, Control: a["control"], Rule: a["rule"], Detail: a["detail"],
		Target: a["target"], OperationID: a["operation_id"], Hint: a["hint"],
	}
	if s := a["at"]; s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return spec.Event{}, fmt.Errorf("decode boundary event: at: %w", err)
		}
		e.At = t
	}
	if err := e.Validate(); err != nil {
		return spec.Event{}, fmt.Errorf("decode boundary event: %w", err)
	}
	return e, nil
}

// FromAny decodes an envelope's event (as `gensee events` receives it from
// containerd's event service).
func FromAny(a typeurl.Any) (spec.Event, error) {
	if a == nil {
		return spec.Event{}, fmt.Errorf("decode boundary event: no event")
	}
	v, err := typeurl.UnmarshalAny(a)
	if err != nil {
		return spec.Event{}, fmt.Errorf("decode boundary event: %w", err)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return spec.Event{}, fmt.Errorf("decode boundary event: %T is not %s", v, runtimeInfoURL)
	}
	return FromProto(m)
}

// FindingToProto maps a finding of operation opID to the message published
// on events.TopicAttention.
func FindingToProto(opID string, f spec.Finding) proto.Message {
	ev := make([]string, 0, len(f.Evidence))
	for _, e := range f.Evidence {
		ev = append(ev, strings.TrimSpace(e.Kind+" "+e.Target))
	}
	return &types.RuntimeInfo{
		Name: attentionPrefix + spec.AttentionControlDefeat,
		Annotations: map[string]string{
			"operation_id": opID,
			"signature":    f.Signature,
			"detail":       events.Redact(f.Detail),
			"at":           f.At.UTC().Format(time.RFC3339Nano),
			"evidence":     strings.Join(ev, "; "),
			"evidence_n":   strconv.Itoa(len(f.Evidence)),
		},
	}
}

// Line decodes an envelope of a subscription to the /gensee/ topics into
// the line `gensee events --follow` prints: a boundary event (sanitized)
// or an attention. It rejects what is not gensee's.
func Line(en *cdevents.Envelope) (events.LiveLine, error) {
	line := events.LiveLine{Topic: en.Topic, Namespace: en.Namespace}
	if en.Topic == events.TopicAttention {
		a, err := AttentionFromAny(en.Event)
		if err != nil {
			return line, err
		}
		line.Attention = &a
		return line, nil
	}
	e, err := FromAny(en.Event)
	if err != nil {
		return line, err
	}
	e = events.Sanitize(e)
	line.Event = &e
	return line, nil
}

// AttentionFromAny decodes a finding FindingToProto made, as an envelope
// carries it.
func AttentionFromAny(a typeurl.Any) (events.LiveAttention, error) {
	var out events.LiveAttention
	if a == nil {
		return out, errors.New("decode attention: no event")
	}
	v, err := typeurl.UnmarshalAny(a)
	if err != nil {
		return out, fmt.Errorf("decode attention: %w", err)
	}
	ri, ok := v.(*types.RuntimeInfo)
	if !ok || ri.GetName() != attentionPrefix+spec.AttentionControlDefeat {
		return out, fmt.Errorf("decode attention: %T is not a gensee attention", v)
	}
	an := ri.GetAnnotations()
	out = events.LiveAttention{OperationID: an["operation_id"], Signature: an["signature"],
		Detail: events.Redact(an["detail"]), Evidence: events.Redact(an["evidence"])}
	if out.At, err = time.Parse(time.RFC3339Nano, an["at"]); err != nil {
		return out, fmt.Errorf("decode attention: at: %w", err)
	}
	if out.Signature == "" {
		return out, errors.New("decode attention: no signature")
	}
	return out, nil
}
