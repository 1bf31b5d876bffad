package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

type eventsOptions struct {
	ref     opRef
	follow  bool
	json    bool
	address string
}

func eventsCommand() *Command {
	return &Command{
		Name:       "events",
		Summary:    "show an operation's boundary events, or follow them live",
		Args:       "[--follow] " + opRefArgs + " [--json]\n  gensee [-a SOCK] events --follow [--json]",
		Positional: opRefPositional,
		Long: `Reads <state_dir>/operations/<opid>/events.jsonl, the runtime's log of what
the operation's controls refused and what the watchdog saw, and prints one
row per event: time (local), kind, control/rule, target, detail. A hint is
guidance, printed on its own line below its event: it never changed a
decision. --json prints the events as JSON lines, as the log stores them.

The log is bounded: when it reaches its size bound the runtime counts events
instead of writing them, and this command says how many:
  N events dropped: the log reached its size bound
Lines that did not parse (a torn write) are skipped and counted. With --json
these notes go to stderr.

--follow prints the log, then every event appended to it, until interrupted
(SIGINT or SIGTERM: exit 0); a log that does not exist yet is waited for.

--follow without an operation instead subscribes to the events of the
containerd daemon at the global -a/--address (default $CONTAINERD_ADDRESS,
else /run/containerd/containerd.sock; --address SOCK here names it too) on
/gensee/ topics: live events of every container that runs under gensee,
each row prefixed with its namespace and operation id, and every attention
raised (ATTENTION control_defeat). With --json each is one line
{"topic", "namespace", "event" | "attention"}. The subscription is
gensee-events, run from beside gensee (as trusted as gensee's binary).`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o eventsOptions
			o.ref.flags(fs)
			fs.BoolVar(&o.follow, "follow", false, "keep printing events as they are appended, until interrupted")
			fs.BoolVar(&o.json, "json", false, "print JSON lines instead of rows")
			fs.StringVar(&o.address, "address", "", "with --follow: containerd socket `SOCK` whose live /gensee/ events to print (every container)")
			return o.run
		},
	}
}

func (o *eventsOptions) run(ctx context.Context, env *Env) error {
	if o.address != "" {
		switch {
		case !o.follow:
			return errUsage("--address subscribes to live events: add --follow")
		case o.ref.container != "" || o.ref.operation != "":
			return errUsage("--address shows the live events of every container; --container and --operation read one operation's log instead")
		}
		return watchContainerd(ctx, env, o.address, o.json)
	}
	if o.ref.container == "" && o.ref.operation == "" {
		if !o.follow {
			return errUsage("pass --container ID (with --namespace NS) or --operation ID, or the container id as the argument; or add --follow for the live events of every container")
		}
		return watchContainerd(ctx, env, env.globals().address, o.json)
	}
	op, err := o.ref.resolve(env)
	if err != nil {
		return err
	}
	path, err := recordPath(op.dir, record.EventsFile)
	if err != nil {
		return err
	}
	p := eventPrinter{w: env.Stdout, json: o.json}
	notes := env.Stdout
	if o.json {
		notes = env.Stderr // keep stdout JSON lines only
	}
	if o.follow {
		return followEvents(ctx, path, 0, p, notes)
	}
	c, err := events.Read(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(notes, "no events recorded for operation %s yet\n", op.id)
		return nil
	case err != nil:
		return fail(ExitUsage, "read events of operation "+op.id, err, "check the permissions of "+path)
	}
	for _, e := range c.Events {
		if err := p.print(e); err != nil {
			return fail(ExitUsage, "write output", err, "")
		}
	}
	if len(c.Events) == 0 && c.Dropped == 0 {
		fmt.Fprintf(notes, "no events recorded for operation %s\n", op.id)
	}
	writeLogNotes(notes, c)
	return nil
}

// followEvents prints the log at path and what is appended to it until ctx
// is done, then the log's dropped and malformed counts. interval <= 0 is
// events.Follow's default.
func followEvents(ctx context.Context, path string, interval time.Duration, p eventPrinter, notes io.Writer) error {
	if err := events.Follow(ctx, path, interval, p.print); err != nil {
		return fail(ExitUsage, "follow events in "+path, err, "")
	}
	if c, err := events.Read(path); err == nil {
		writeLogNotes(notes, c)
	}
	return nil
}

// writeLogNotes says what the rows do not show: events never written and
// lines skipped.
func writeLogNotes(w io.Writer, c events.Contents) {
	if c.Dropped > 0 {
		fmt.Fprintf(w, "%d events dropped: the log reached its size bound\n", c.Dropped)
	}
	if c.Malformed > 0 {
		fmt.Fprintf(w, "%s skipped (a torn write)\n", plural(c.Malformed, "malformed line"))
	}
}

// eventPrinter writes events as rows a person reads or as JSON lines.
type eventPrinter struct {
	w      io.Writer
	json   bool
	prefix string // before each row, e.g. "k8s.io  0123456789ab  "
}

// guidanceMark starts a hint's line: the hint is advice, not a decision.
const guidanceMark = "guidance (changes no decision): "

func (p eventPrinter) print(e spec.Event) error {
	e = events.Sanitize(e)
	if p.json {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = p.w.Write(append(b, '\n'))
		return err
	}
	hint := e.Hint
	e.Hint = ""
	if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, safeText(events.Row(e))); err != nil {
		return err
	}
	if hint != "" {
		_, err := fmt.Fprintf(p.w, "    %s%s\n", guidanceMark, safeText(hint))
		return err
	}
	return nil
}

// recordPath is the path of a runtime record in an operation directory,
// refusing one that exists as anything but a regular file (a symlink there
// is not the runtime's). A missing record is not an error here.
func recordPath(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	st, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil
	case err != nil:
		return "", readErr("record", p, err)
	case !st.Mode().IsRegular():
		return "", fail(ExitUsage, "read "+p, fmt.Errorf("not a regular file (%s)", st.Mode().Type()),
			"the runtime writes only regular files there: inspect the state dir")
	}
	return p, nil
}
