package events

import (
	"context"
	"fmt"
	"time"

	"github.com/gensee/gensee/spec"
)

// Topics gensee publishes on. Outside /tasks/, so CRI ignores them.
const (
	TopicBoundary  = "/gensee/boundary"
	TopicAttention = "/gensee/attention"
)

// Publisher carries a door's events and findings beyond events.jsonl: the
// shim's go onto containerd's event service (shim/events/wire maps them to
// containerd's types there). Host runs and OCI hooks have none.
type Publisher interface {
	// PublishEvent publishes a sanitized event on TopicBoundary.
	PublishEvent(ctx context.Context, e spec.Event) error
	// PublishFinding publishes a finding of operation opID on
	// TopicAttention.
	PublishFinding(ctx context.Context, opID string, f spec.Finding) error
}

// Publish sanitizes e and publishes it on TopicBoundary; a nil p publishes
// nowhere.
func Publish(ctx context.Context, p Publisher, e spec.Event) error {
	if p == nil {
		return nil
	}
	if err := p.PublishEvent(ctx, Sanitize(e)); err != nil {
		return fmt.Errorf("publish %s event: %w", e.Kind, err)
	}
	return nil
}

// PublishFinding publishes a finding of operation opID on TopicAttention;
// a nil p publishes nowhere.
func PublishFinding(ctx context.Context, p Publisher, opID string, f spec.Finding) error {
	if p == nil {
		return nil
	}
	if err := p.PublishFinding(ctx, opID, f); err != nil {
		return fmt.Errorf("publish %s finding: %w", f.Signature, err)
	}
	return nil
}

// LiveLine is one event of a live subscription to containerd's /gensee/
// topics, as gensee-events hands it to `gensee events --follow` and as that
// prints it with --json: an event (TopicBoundary) or an attention
// (TopicAttention).
type LiveLine struct {
	Topic     string         `json:"topic"`
	Namespace string         `json:"namespace"`
	Event     *spec.Event    `json:"event,omitempty"`
	Attention *LiveAttention `json:"attention,omitempty"`
}

// LiveAttention is a finding as published on TopicAttention: the evidence
// travels as "kind target" pairs.
type LiveAttention struct {
	OperationID string    `json:"operation_id"`
	Signature   string    `json:"signature"`
	Detail      string    `json:"detail"`
	At          time.Time `json:"at"`
	Evidence    string    `json:"evidence"`
}
