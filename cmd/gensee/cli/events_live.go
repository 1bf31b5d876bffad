package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/containerd/containerd/api/types"
	cdevents "github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/pkg/dialer"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/spec"
)

// gensee's topics all start with this; containerd's filter matches it as a
// regular expression.
const liveFilter = `topic~="/gensee/"`

// watchContainerd subscribes to the daemon at address and prints gensee's
// events until ctx is done.
func watchContainerd(ctx context.Context, env *Env, address string, asJSON bool) error {
	conn, err := grpc.NewClient(dialer.DialAddress(address), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer.ContextDialer))
	if err != nil {
		return fail(ExitUsage, "connect to containerd at "+address, err, "check --address names containerd's socket (usually /run/containerd/containerd.sock)")
	}
	defer conn.Close()
	ch, errs := subscribe(ctx, eventsapi.NewEventsClient(conn), liveFilter)
	if err := watchEnvelopes(ctx, env, asJSON, ch, errs); err != nil {
		return fail(ExitUsage, "subscribe to containerd events at "+address, err,
			"check --address names containerd's socket and that you may use it (root)")
	}
	return nil
}

// subscribe is containerd's event subscription over the events service
// alone (the full client would link every service's API into the CLI).
func subscribe(ctx context.Context, c eventsapi.EventsClient, filters ...string) (<-chan *cdevents.Envelope, <-chan error) {
	evq, errq := make(chan *cdevents.Envelope), make(chan error, 1)
	session, err := c.Subscribe(ctx, &eventsapi.SubscribeRequest{Filters: filters})
	if err != nil {
		errq <- err
		close(errq)
		return evq, errq
	}
	go func() {
		defer close(errq)
		for {
			ev, err := session.Recv()
			if err != nil {
				errq <- err
				return
			}
			select {
			case evq <- &cdevents.Envelope{Timestamp: ev.Timestamp.AsTime(), Namespace: ev.Namespace, Topic: ev.Topic, Event: ev.Event}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return evq, errq
}

// watchEnvelopes prints envelopes from ch until ctx is done (nil) or the
// subscription fails. An envelope that is not a gensee event is skipped
// with a warning.
func watchEnvelopes(ctx context.Context, env *Env, asJSON bool, ch <-chan *cdevents.Envelope, errs <-chan error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-errs:
			if ctx.Err() != nil {
				return nil
			}
			if !ok {
				return errors.New("the daemon ended the subscription")
			}
			return err
		case env0, ok := <-ch:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the daemon ended the subscription")
			}
			if err := printEnvelope(env, asJSON, env0); err != nil {
				return err
			}
		}
	}
}

// liveLine is one --json line of a live subscription.
type liveLine struct {
	Topic     string         `json:"topic"`
	Namespace string         `json:"namespace"`
	Event     *spec.Event    `json:"event,omitempty"`
	Attention *liveAttention `json:"attention,omitempty"`
}

func printEnvelope(env *Env, asJSON bool, en *cdevents.Envelope) error {
	line := liveLine{Topic: en.Topic, Namespace: en.Namespace}
	var err error
	if en.Topic == events.TopicAttention {
		var a liveAttention
		a, err = attentionFromAny(en.Event)
		line.Attention = &a
	} else {
		var e spec.Event
		e, err = events.FromAny(en.Event)
		e = events.Sanitize(e)
		line.Event = &e
	}
	if err != nil {
		env.warnf("skip an event on %s in namespace %s: %v", safeText(en.Topic), safeText(en.Namespace), err)
		return nil
	}
	if asJSON {
		b, err := json.Marshal(line)
		if err != nil {
			return err
		}
		_, err = env.Stdout.Write(append(b, '\n'))
		return err
	}
	if line.Attention != nil {
		a := line.Attention
		_, err := fmt.Fprintf(env.Stdout, "%s  %s  %s  ATTENTION %s  %s  %s  (evidence: %s)\n",
			safeText(en.Namespace), safeText(a.OperationID), a.At.Local().Format(events.RowTime),
			spec.AttentionControlDefeat, safeText(a.Signature), safeText(a.Detail), safeText(orText(a.Evidence, "none")))
		return err
	}
	p := eventPrinter{w: env.Stdout, prefix: safeText(en.Namespace) + "  " + safeText(orText(line.Event.OperationID, "-")) + "  "}
	return p.print(*line.Event)
}

// liveAttention is a finding as published on events.TopicAttention (see
// events.FindingToProto): the evidence travels as "kind target" pairs.
type liveAttention struct {
	OperationID string    `json:"operation_id"`
	Signature   string    `json:"signature"`
	Detail      string    `json:"detail"`
	At          time.Time `json:"at"`
	Evidence    string    `json:"evidence"`
}

func attentionFromAny(a typeurl.Any) (liveAttention, error) {
	var out liveAttention
	if a == nil {
		return out, errors.New("decode attention: no event")
	}
	v, err := typeurl.UnmarshalAny(a)
	if err != nil {
		return out, fmt.Errorf("decode attention: %w", err)
	}
	ri, ok := v.(*types.RuntimeInfo)
	if !ok || ri.GetName() != "gensee.attention/"+spec.AttentionControlDefeat {
		return out, fmt.Errorf("decode attention: %T is not a gensee attention", v)
	}
	an := ri.GetAnnotations()
	out = liveAttention{OperationID: an["operation_id"], Signature: an["signature"],
		Detail: events.Redact(an["detail"]), Evidence: events.Redact(an["evidence"])}
	if out.At, err = time.Parse(time.RFC3339Nano, an["at"]); err != nil {
		return out, fmt.Errorf("decode attention: at: %w", err)
	}
	if out.Signature == "" {
		return out, errors.New("decode attention: no signature")
	}
	return out, nil
}
