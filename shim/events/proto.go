package events

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/api/types"
	cdevents "github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"

	"github.com/gensee/gensee/spec"
)

// Topics gensee publishes on. Outside /tasks/, so CRI ignores them.
const (
	TopicBoundary  = "/gensee/boundary"
	TopicAttention = "/gensee/attention"
)

// Publisher is the one method of containerd's shim publisher gensee uses;
// shim.Publisher satisfies it.
type Publisher interface {
	Publish(ctx context.Context, topic string, event cdevents.Event) error
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
// TopicBoundary.
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
// on TopicAttention.
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
			"detail":       Redact(f.Detail),
			"at":           f.At.UTC().Format(time.RFC3339Nano),
			"evidence":     strings.Join(ev, "; "),
			"evidence_n":   strconv.Itoa(len(f.Evidence)),
		},
	}
}

// Publish sanitizes e and publishes it on TopicBoundary.
func Publish(ctx context.Context, p Publisher, e spec.Event) error {
	if p == nil {
		return nil
	}
	if err := p.Publish(ctx, TopicBoundary, ToProto(Sanitize(e))); err != nil {
		return fmt.Errorf("publish %s event: %w", e.Kind, err)
	}
	return nil
}

// PublishFinding publishes a finding of operation opID on TopicAttention.
func PublishFinding(ctx context.Context, p Publisher, opID string, f spec.Finding) error {
	if p == nil {
		return nil
	}
	if err := p.Publish(ctx, TopicAttention, FindingToProto(opID, f)); err != nil {
		return fmt.Errorf("publish %s finding: %w", f.Signature, err)
	}
	return nil
}
