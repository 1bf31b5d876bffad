// Command gensee-events subscribes to a containerd daemon's /gensee/ topics
// and hands each event or attention published there to `gensee events
// --follow`, which starts it from beside itself (as trusted as gensee, run
// from the file that was checked) and prints what it hands over. It is the
// only program of gensee's that subscribes, so the CLI never links gRPC or
// containerd's protobuf types: their start-up would slow every gensee
// command, a host run's among them.
//
// Usage: gensee-events --address SOCK. stdout gets one JSON line per event
// (events.LiveLine: topic, namespace, and event or attention), until the
// subscription ends or SIGINT/SIGTERM (exit 0). gensee starts it with an
// empty environment, / as its working directory, only its three pipes, in
// a process group of its own, and SIGKILL should gensee die; it names
// itself gensee-events. A message that is not
// gensee's is skipped with a warning on stderr. A subscription that fails
// or ends is a message on stderr (its last line) and exit status 1; a usage
// error, exit status 2.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	cdevents "github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/pkg/dialer"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gensee/gensee/shim/events/wire"
)

// liveFilter: gensee's topics all start with /gensee/; containerd's filter
// matches it as a regular expression.
const liveFilter = `topic~="/gensee/"`

func main() {
	fs := flag.NewFlagSet("gensee-events", flag.ContinueOnError)
	address := fs.String("address", "", "containerd socket `SOCK` to subscribe to")
	if err := fs.Parse(os.Args[1:]); err != nil || *address == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: gensee-events --address SOCK (started by gensee events --follow)")
		os.Exit(2)
	}
	// Run from /proc/self/fd/N, it names itself for ps and pgrep.
	name := []byte("gensee-events\x00")
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *address, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}

// run subscribes to the daemon at address and writes its gensee events to
// out until ctx is done (nil) or the subscription fails or ends.
func run(ctx context.Context, address string, out, warn io.Writer) error {
	conn, err := grpc.NewClient(dialer.DialAddress(address), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer.ContextDialer))
	if err != nil {
		return fmt.Errorf("connect to containerd at %s: %w", address, err)
	}
	defer conn.Close()
	session, err := eventsapi.NewEventsClient(conn).Subscribe(ctx, &eventsapi.SubscribeRequest{Filters: []string{liveFilter}})
	if err != nil {
		return subscriptionEnded(ctx, err)
	}
	enc := json.NewEncoder(out)
	for {
		ev, err := session.Recv()
		if err != nil {
			return subscriptionEnded(ctx, err)
		}
		if err := hand(enc, warn, &cdevents.Envelope{Timestamp: ev.Timestamp.AsTime(), Namespace: ev.Namespace, Topic: ev.Topic, Event: ev.Event}); err != nil {
			return err
		}
	}
}

// hand writes one envelope's line; one that is not gensee's is skipped
// with a warning.
func hand(enc *json.Encoder, warn io.Writer, en *cdevents.Envelope) error {
	line, err := wire.Line(en)
	if err != nil {
		fmt.Fprintf(warn, "gensee: warning: skip an event on %q in namespace %q: %v\n", en.Topic, en.Namespace, err)
		return nil
	}
	if err := enc.Encode(line); err != nil {
		return fmt.Errorf("write an event: %w", err)
	}
	return nil
}

// subscriptionEnded is nil when ctx ended the subscription, else why it
// failed or ended.
func subscriptionEnded(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return errors.New("the daemon ended the subscription")
	}
	return fmt.Errorf("subscribe to containerd's events: %w", err)
}
