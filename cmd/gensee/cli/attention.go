package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
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
	all    bool
	since  time.Duration
}

func attentionListCommand() *Command {
	return &Command{
		Name:    "list",
		Summary: "list the operations with an open control_defeat finding (--all: every finding ever raised)",
		Args:    "[--all] [--since DURATION] [--json] [--config F]",
		Long: `The runtime's watchdog records a finding in the operation's attention.json
when a control_defeat signature fires: evidence that a boundary failed. It
never stops the task. The finding stays after the task ends; only a person
('gensee attention clear') clears it, and the clearing is recorded (who,
when) beside it, never deleted. Retention keeps an operation with an open
finding.

Prints one row per open finding, oldest first: operation id, container
(namespace/id), signature, when it fired (local time), how many events it
used as evidence, and its one-sentence detail; "no operation needs
attention" when none is open. --all lists cleared findings too, with who
cleared them and when; --since DURATION only findings raised within it
(e.g. 24h). --json prints an array with sorted keys: [{operation_id,
container, state, findings[] {signature, detail, at, evidence, cleared
{by, at, note}}}], evidence being the count of evidence events (the
events themselves: gensee boundary audit --operation ID --json).

Exit 0 whether or not anything is flagged; gensee boundary audit
--operation ID exits 4 for an operation that defeated a control.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o attentionListOptions
			addConfigFlag(fs, &o.config)
			fs.BoolVar(&o.json, "json", false, "print the list as JSON")
			fs.BoolVar(&o.all, "all", false, "list cleared findings too")
			fs.DurationVar(&o.since, "since", 0, "only findings raised within `DURATION` (e.g. 24h)")
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
	Signature string         `json:"signature"`
	Detail    string         `json:"detail"`
	At        time.Time      `json:"at"`
	Evidence  int            `json:"evidence"`
	Cleared   *spec.Clearing `json:"cleared,omitempty"`
}

// attentionItem lists a's findings that keep says to keep.
func attentionItem(a spec.Attention, container string, keep func(spec.Finding) bool) AttentionItem {
	it := AttentionItem{OperationID: a.OperationID, Container: container, State: a.State, Findings: []AttentionFinding{}}
	for _, f := range a.Findings {
		if keep != nil && !keep(f) {
			continue
		}
		it.Findings = append(it.Findings, AttentionFinding{Signature: f.Signature, Detail: events.Redact(f.Detail), At: f.At,
			Evidence: len(f.Evidence), Cleared: f.Cleared})
	}
	return it
}

func (o *attentionListOptions) run(_ context.Context, env *Env) error {
	cfg, err := env.operatorConfig(o.config)
	if err != nil {
		return err
	}
	s := record.Store{Dir: cfg.StateDir}
	list, err := events.ListAttention(s, o.all)
	if err != nil {
		return fail(ExitUsage, "list attention in state dir "+cfg.StateDir, err, "run as root, or pass --config F naming the runtime's state_dir")
	}
	since := time.Time{}
	if o.since > 0 {
		since = env.Now().Add(-o.since)
	}
	keep := func(f spec.Finding) bool { return (o.all || f.Cleared == nil) && !f.At.Before(since) }
	items := []AttentionItem{}
	for _, a := range list {
		container := ""
		if dir, err := s.OperationDir(a.OperationID); err == nil {
			container = admittedContainer(dir)
		}
		if it := attentionItem(a, container, keep); len(it.Findings) > 0 {
			items = append(items, it)
		}
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
	row(tw, "OPERATION", "CONTAINER", "SIGNATURE", "WHEN", "EVIDENCE", "CLEARED", "DETAIL")
	for _, it := range items {
		for _, f := range it.Findings {
			cleared := "-"
			if c := f.Cleared; c != nil {
				cleared = c.At.Local().Format(events.RowTime) + " by " + c.By
			}
			row(tw, it.OperationID, safeText(orText(it.Container, "-")), safeText(f.Signature),
				f.At.Local().Format(events.RowTime), strconv.Itoa(f.Evidence), safeText(cleared), safeText(f.Detail))
		}
	}
	return tw.Flush()
}

type attentionClearOptions struct {
	operation, config, note string
}

func attentionClearCommand() *Command {
	return &Command{
		Name:       "clear",
		Summary:    "clear an operation's attention after a person looked at it",
		Args:       "(OPID | --operation OPID) [--note TEXT] [--config F]",
		Positional: "operation",
		Long: `Records on each open finding of the operation that a person looked at it:
who (the account the kernel says ran this command, e.g. "uid 0 (root)"; a
sudo caller's SUDO_USER is added as what the environment claims), when,
and --note. Nothing is deleted: 'gensee attention list --all' and the
manifest keep showing the finding. Clearing is a person's decision:
nothing else clears it, and a later finding is open again. Retention may
then prune the operation like any other.

Exit 0 when something was cleared, 1 when no attention was set.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o attentionClearOptions
			fs.StringVar(&o.operation, "operation", "", "operation `ID` (32 hex characters) whose attention to clear")
			fs.StringVar(&o.note, "note", "", "what the person found, recorded with the clearing")
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
	open := a.Open()
	n, err := events.ClearAttention(op.store(), op.id, spec.Clearing{By: clearer(), At: env.Now().UTC(), Note: o.note})
	if errors.Is(err, events.ErrAttentionDamaged) {
		fmt.Fprintf(env.Stdout, "cleared attention on operation %s: its attention.json did not parse; kept as %s: %v\n", op.id, events.DamagedAttentionFile, err)
		return nil
	}
	if err != nil {
		return fail(ExitUsage, "clear attention on operation "+op.id, err, "run as root")
	}
	if n == 0 {
		return fail(ExitRefused, "clear attention on operation "+op.id, errors.New("no finding is open"),
			"'gensee attention list' shows the operations with open findings; --all the cleared ones too")
	}
	who := ""
	if op.who != "" {
		who = " (" + safeText(op.who) + ")"
	}
	if rerr != nil {
		fmt.Fprintf(env.Stdout, "cleared attention on operation %s%s; its attention.json did not parse: %v\n", op.id, who, rerr)
		return nil
	}
	fmt.Fprintf(env.Stdout, "cleared attention on operation %s%s: %s\n", op.id, who, plural(n, "finding"))
	a.Findings = open
	it := attentionItem(a, op.who, nil)
	for _, f := range it.Findings {
		fmt.Fprintf(env.Stdout, "  %s  %s  %s evidence  %s\n", f.At.Local().Format(events.RowTime), safeText(f.Signature),
			strconv.Itoa(f.Evidence), safeText(f.Detail))
	}
	return nil
}

// clearer names who clears: the account the kernel says runs this
// command, and the sudo caller the environment claims (not verified).
func clearer() string {
	uid := os.Getuid()
	who := fmt.Sprintf("uid %d", uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		who += " (" + u.Username + ")"
	}
	if su := os.Getenv("SUDO_USER"); su != "" && uid == 0 {
		who += ", SUDO_USER=" + safeText(su)
	}
	return who
}

// plural is "1 finding", "2 findings".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
