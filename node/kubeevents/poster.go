package kubeevents

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/gensee/gensee/node/records"
)

// Component is the Events' source (reportingController).
const Component = "gensee-node"

// DefaultMaxAge is how old a record may be and still be posted: the
// apiserver's default Event TTL.
const DefaultMaxAge = time.Hour

// Config is what a Poster needs.
type Config struct {
	Client kubernetes.Interface
	// Node is this node's name: the Events' source host.
	Node string
	// MaxAge: older records are not posted (DefaultMaxAge if <= 0).
	MaxAge time.Duration
	// Egress posts egress denials too (GenseeEgressDenied).
	Egress bool
	// Correlator overrides the correlator's defaults (tests); its
	// SpamKeyFunc is always spamKey.
	Correlator record.CorrelatorOptions
	Now        func() time.Time
}

// Poster posts Events for records.
type Poster struct {
	cfg Config
	bc  record.EventBroadcaster
	rec record.EventRecorder
}

// New starts the broadcaster posting to cfg.Client; Shutdown stops it.
func New(ctx context.Context, cfg Config) *Poster {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	opts := cfg.Correlator
	opts.SpamKeyFunc = spamKey
	bc := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(opts))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
	rec := bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component, Host: cfg.Node})
	return &Poster{cfg: cfg, bc: bc, rec: rec}
}

// spamKey is client-go's default rate-limit key (source, object, type)
// with the reason: each pod has a bucket per reason, so egress denials
// never use up the tokens of a refusal or a finding.
func spamKey(e *corev1.Event) string {
	o := e.InvolvedObject
	return strings.Join([]string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, e.Type, e.Reason}, "")
}

// Post posts r's Event, if it makes one and is recent; it never blocks
// (the broadcaster drops past its queue).
func (p *Poster) Post(r records.Record) bool {
	ev, ok := For(r, p.cfg.Egress)
	if !ok || p.cfg.Now().Sub(when(r)) > p.cfg.MaxAge {
		return false
	}
	p.rec.Event(ev.Pod, corev1.EventTypeWarning, ev.Reason, ev.Message)
	return true
}

// Shutdown stops the broadcaster (Events still queued are dropped).
func (p *Poster) Shutdown() { p.bc.Shutdown() }

// when is the time a record happened.
func when(r records.Record) time.Time {
	switch r := r.(type) {
	case records.Refusal:
		return r.At
	case records.Gate:
		return r.At
	case records.Finding:
		return r.Finding.At
	case records.EgressDenied:
		return r.Event.At
	case records.Admission:
		return r.At
	}
	return time.Time{}
}
