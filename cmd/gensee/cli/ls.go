package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/gensee/gensee/shim/promote"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/retention"
)

type lsOptions struct {
	config      string
	quiet, json bool
}

func lsCommand() *Command {
	return &Command{
		Name:    "ls",
		Summary: "list operations: id, container, contract, gate verdict, attention, promotions, age",
		Args:    "[-q] [-n NS] [--json] [--config F]",
		Long: `Lists the operation records under the operator config's state_dir, newest
first: operation id, namespace/container, contract, the gate's verdict
(running while the task has no manifest yet), attention ("SET (n)": a
finding no person has cleared, of n ever raised; "cleared (n)": n findings,
all cleared; "-": none), how many promotions gensee promote recorded
("-": none), and the age since the task was created. With -n NS (or $CONTAINERD_NAMESPACE)
only the operations of that namespace; host runs are in namespace "host".
-q prints only the operation ids. --json prints an array with sorted keys:
[{operation_id, namespace, container, contract, verdict, state, attention,
findings, promotions, created_at, finished_at}], state being running | exited |
deleted, attention true while a finding is open.

An id printed here is what gensee manifest show, events, boundary audit and
attention clear take as their argument.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o lsOptions
			addConfigFlag(fs, &o.config)
			fs.BoolVar(&o.quiet, "q", false, "print only the operation ids")
			fs.BoolVar(&o.quiet, "quiet", false, "print only the operation ids")
			fs.BoolVar(&o.json, "json", false, "print the list as JSON")
			return o.run
		},
	}
}

// LsItem is one operation in gensee ls --json.
type LsItem struct {
	OperationID string     `json:"operation_id"`
	Namespace   string     `json:"namespace"`
	Container   string     `json:"container"`
	Contract    string     `json:"contract"`
	Verdict     string     `json:"verdict"`
	State       string     `json:"state"`
	Attention   bool       `json:"attention"`  // a finding is open
	Findings    int        `json:"findings"`   // findings ever raised, cleared or not
	Promotions  int        `json:"promotions"` // promotion records (gensee promote)
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at"`
}

func (o *lsOptions) run(_ context.Context, env *Env) error {
	if o.quiet && o.json {
		return errUsage("-q and --json exclude each other")
	}
	cfg, err := env.operatorConfig(o.config)
	if err != nil {
		return err
	}
	store := record.Store{Dir: cfg.StateDir}
	ops, err := retention.Scan(store, false)
	if err != nil {
		return fail(ExitUsage, "list operations", err, "run as root, or pass --config F naming the runtime's state_dir")
	}
	g := env.globals()
	items := []LsItem{}
	for _, op := range ops {
		if g.namespaceSet && op.Namespace != g.namespace {
			continue
		}
		it := LsItem{OperationID: op.ID, Namespace: op.Namespace, Container: op.Container, Contract: op.ContractID,
			Verdict: op.Verdict, State: op.State, Attention: op.Attention, Findings: op.Findings, CreatedAt: op.Created.UTC()}
		ps, err := promote.Records(store, op.ID)
		if err != nil {
			env.warnf("promotion records of operation %s: %v", op.ID, err)
		}
		it.Promotions = len(ps)
		if !op.Finished.IsZero() {
			t := op.Finished.UTC()
			it.FinishedAt = &t
		}
		items = append(items, it)
	}
	slices.SortFunc(items, func(a, b LsItem) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.OperationID, b.OperationID))
	})
	switch {
	case o.json:
		err = writeJSON(env.Stdout, items)
	case o.quiet:
		for _, it := range items {
			if _, err = fmt.Fprintln(env.Stdout, it.OperationID); err != nil {
				break
			}
		}
	default:
		err = renderLs(env.Stdout, items, env.Now())
	}
	if err != nil {
		return fail(ExitUsage, "write output", err, "")
	}
	return nil
}

func renderLs(w io.Writer, items []LsItem, now time.Time) error {
	tw := table(w)
	row(tw, "OPERATION", "CONTAINER", "CONTRACT", "VERDICT", "ATTENTION", "PROMOTED", "AGE")
	for _, it := range items {
		who := "-"
		if it.Container != "" {
			who = it.Namespace + "/" + it.Container
		}
		verdict := it.Verdict
		if it.State == retention.StateRunning {
			verdict = "running"
		}
		attention := "-"
		switch {
		case it.Attention:
			attention = "SET"
			if it.Findings > 0 {
				attention = fmt.Sprintf("SET (%d)", it.Findings)
			}
		case it.Findings > 0:
			attention = fmt.Sprintf("cleared (%d)", it.Findings)
		}
		promoted := "-"
		if it.Promotions > 0 {
			promoted = strconv.Itoa(it.Promotions)
		}
		row(tw, it.OperationID, safeText(who), safeText(orText(it.Contract, "-")), safeText(orText(verdict, "-")), attention, promoted, age(now.Sub(it.CreatedAt)))
	}
	return tw.Flush()
}

// age is a duration as ps and ctr print it: 45s, 12m, 5h, 3d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}
