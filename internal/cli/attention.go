package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

func attentionCommand() *Command {
	return &Command{
		Name:    "attention",
		Summary: "list the operations a control-defeat signature flagged, and clear a flag once a person looked",
		Subs:    []*Command{attentionListCommand(), attentionClearCommand()},
	}
}

type attentionListOptions struct {
	config string
	json   bool
}

func attentionListCommand() *Command {
	return &Command{
		Name:    "list",
		Summary: "list every operation whose attention is set (control_defeat)",
		Args:    "[--json] [--config F]",
		Long: `The runtime's watchdog sets an operation's attention (attention.json in its
directory) when a control_defeat signature fires: evidence that a boundary
failed. It never stops the task. Only 'gensee attention clear' (a person)
or the task ending clears it.

Prints one row per finding, oldest first: operation id, container
(namespace/id), signature, when it fired (local time), how many events it
used as evidence, and its one-sentence detail; "no operation needs
attention" when none is set. --json prints an array with sorted keys:
[{operation_id, container, state, findings[] {signature, detail, at,
evidence}}], evidence being the count of evidence events (the events
themselves: gensee boundary audit --operation ID --json).

Exit 0 whether or not anything is flagged; gensee boundary audit
--operation ID exits 4 for an operation that defeated a control.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o attentionListOptions
			addConfigFlag(fs, &o.config)
			fs.BoolVar(&o.json, "json", false, "print the list as JSON")
			return o.run
		},
	}
}

// AttentionItem is one flagged operation in attention list --json.
type AttentionItem struct {
	OperationID string             `json:"operation_id"`
	Container   string             `json:"container"` // namespace/id from admission.json, "" if unknown
	State       string             `json:"state"`
	Findings    []AttentionFinding `json:"findings"`
}

// AttentionFinding is a finding with its evidence counted.
type AttentionFinding struct {
	Signature string    `json:"signature"`
	Detail    string    `json:"detail"`
	At        time.Time `json:"at"`
	Evidence  int       `json:"evidence"`
}

func attentionItem(a spec.Attention, container string) AttentionItem {
	it := AttentionItem{OperationID: a.OperationID, Container: container, State: a.State, Findings: []AttentionFinding{}}
	for _, f := range a.Findings {
		it.Findings = append(it.Findings, AttentionFinding{Signature: f.Signature, Detail: events.Redact(f.Detail), At: f.At, Evidence: len(f.Evidence)})
	}
	return it
}

func (o *attentionListOptions) run(_ context.Context, env *Env) error {
	cfg, err := env.operatorConfig(o.config)
	if err != nil {
		return err
	}
	s := record.Store{Dir: cfg.StateDir}
	list, err := events.ListAttention(s)
	if err != nil {
		return fail(ExitUsage, "list attention in state dir "+cfg.StateDir, err, "run as root, or pass --config F naming the runtime's state_dir")
	}
	items := []AttentionItem{}
	for _, a := range list {
		container := ""
		if dir, err := s.OperationDir(a.OperationID); err == nil {
			container = admittedContainer(dir)
		}
		items = append(items, attentionItem(a, container))
	}
	if o.json {
		err = writeJSON(env.Stdout, items)
	} else {
		err = renderAttention(env.Stdout, items)
	}
	if err != nil {
		return fail(ExitUsage, "write output", err, "")
	}
	return nil
}

func renderAttention(w io.Writer, items []AttentionItem) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(w, "no operation needs attention")
		return err
	}
	tw := table(w)
	row(tw, "OPERATION", "CONTAINER", "SIGNATURE", "WHEN", "EVIDENCE", "DETAIL")
	for _, it := range items {
		for _, f := range it.Findings {
			row(tw, it.OperationID, safeText(orText(it.Container, "-")), safeText(f.Signature),
				f.At.Local().Format(events.RowTime), strconv.Itoa(f.Evidence), safeText(f.Detail))
		}
	}
	return tw.Flush()
}

type attentionClearOptions struct {
	operation, config string
}

func attentionClearCommand() *Command {
	return &Command{
		Name:       "clear",
		Summary:    "clear an operation's attention after a person looked at it",
		Args:       "(OPID | --operation OPID) [--config F]",
		Positional: "operation",
		Long: `Removes the operation's attention.json and prints what was cleared. Clearing
is a person's decision: nothing else but the task ending clears it, and a
later finding sets it again. The operation's events and its effect manifest
are kept.

Exit 0 when something was cleared, 1 when no attention was set.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o attentionClearOptions
			fs.StringVar(&o.operation, "operation", "", "operation `ID` (32 hex characters) whose attention to clear")
			addConfigFlag(fs, &o.config)
			return o.run
		},
	}
}

func (o *attentionClearOptions) run(_ context.Context, env *Env) error {
	if err := required(map[string]string{"operation": o.operation}); err != nil {
		return err
	}
	ref := opRef{operation: o.operation, namespace: "default", config: o.config}
	op, err := ref.resolve(env)
	if err != nil {
		return err
	}
	if _, err := recordPath(op.dir, events.AttentionFile); err != nil {
		return err
	}
	// Read first to say what is cleared. A finding raised between the read
	// and the clear is cleared too: clear means "a person looked at this
	// operation", so the message says how many findings were read.
	a, _, rerr := events.ReadAttention(op.store(), op.id)
	had, err := events.ClearAttention(op.store(), op.id)
	if err != nil {
		return fail(ExitUsage, "clear attention on operation "+op.id, err, "run as root")
	}
	if !had {
		return fail(ExitRefused, "clear attention on operation "+op.id, errors.New("no attention is set"),
			"'gensee attention list' shows the flagged operations")
	}
	who := ""
	if op.who != "" {
		who = " (" + safeText(op.who) + ")"
	}
	if rerr != nil {
		fmt.Fprintf(env.Stdout, "cleared attention on operation %s%s; its attention.json did not parse: %v\n", op.id, who, rerr)
		return nil
	}
	fmt.Fprintf(env.Stdout, "cleared attention on operation %s%s: %s\n", op.id, who, plural(len(a.Findings), "finding"))
	it := attentionItem(a, op.who)
	for _, f := range it.Findings {
		fmt.Fprintf(env.Stdout, "  %s  %s  %s evidence  %s\n", f.At.Local().Format(events.RowTime), safeText(f.Signature),
			strconv.Itoa(f.Evidence), safeText(f.Detail))
	}
	return nil
}

// plural is "1 finding", "2 findings".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
