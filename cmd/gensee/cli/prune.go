package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/retention"
)

type pruneOptions struct {
	config       string
	dryRun, json bool
}

func pruneCommand() *Command {
	return &Command{
		Name:    "prune",
		Summary: "remove the records the operator config's [retention] limits let go",
		Args:    "[--dry-run] [--json] [--config F]",
		Long: `Applies the operator config's [retention] limits to the state_dir now, as
the runtime does in the background after a task is deleted:

  max_age    an operation that finished longer ago, and a refusal older
             than this, goes (default 720h; "0s" lifts the limit)
  max_count  at most this many operations, and refusals (default 5000)
  max_bytes  at most this many bytes of operation records, staged products
             included, and of refusals.jsonl (default "8GiB")

The oldest finished operations go first. Never removed, whatever the
limits: an operation whose task may still run (no manifest yet, or a host
run in progress), one whose task was not deleted yet, and one whose
attention is set (gensee attention list; clear it once a person looked).
Right before an operation goes, its staged products are re-hashed against
its manifest (as gensee manifest verify does): when they do not match, the
operation stays and a product_mismatch finding is raised on it (--dry-run
re-hashes too, but raises nothing).
An operation's index entry goes before its directory, so a crash part way
loses nothing else; the next prune finishes. refusals.jsonl is cut at its
oldest end only.

Prints each removed operation (id, container, the limit that removed it,
its size), each operation kept for a product mismatch, and a summary;
--dry-run prints what would go and removes nothing. --json prints one
object with sorted keys: dry_run, limits {max_age, max_count, max_bytes},
removed[] {operation_id, namespace, container, reason, bytes, finished_at},
mismatched[] {operation_id, namespace, container, problems, slots[],
findings_raised}, kept {reason: count}, freed_bytes, refusals
{dropped_lines, dropped_bytes, kept_lines}.

Waits for a retention run of the runtime that holds the state dir; exit 2
when a record could not be removed (the others still are).`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o pruneOptions
			addConfigFlag(fs, &o.config)
			fs.BoolVar(&o.dryRun, "dry-run", false, "print what would be removed; remove nothing")
			fs.BoolVar(&o.json, "json", false, "print the report as JSON")
			return o.run
		},
	}
}

// PruneReport is gensee prune --json.
type PruneReport struct {
	DryRun     bool            `json:"dry_run"`
	Limits     PruneLimits     `json:"limits"`
	Removed    []PruneRemoval  `json:"removed"`
	Mismatched []PruneMismatch `json:"mismatched"`
	Kept       map[string]int  `json:"kept"`
	FreedBytes int64           `json:"freed_bytes"`
	Refusals   PruneRefusals   `json:"refusals"`
}

// PruneLimits are the limits applied, as the config writes them.
type PruneLimits struct {
	MaxAge   string `json:"max_age"`
	MaxCount int64  `json:"max_count"`
	MaxBytes string `json:"max_bytes"`
}

// PruneRemoval is one operation record removed (or that would be).
type PruneRemoval struct {
	OperationID string    `json:"operation_id"`
	Namespace   string    `json:"namespace"`
	Container   string    `json:"container"`
	Reason      string    `json:"reason"`
	Bytes       int64     `json:"bytes"`
	FinishedAt  time.Time `json:"finished_at"`
}

// PruneMismatch is an operation prune was about to remove whose staged
// products did not match its manifest: kept, with the finding raised.
type PruneMismatch struct {
	OperationID    string   `json:"operation_id"`
	Namespace      string   `json:"namespace"`
	Container      string   `json:"container"`
	Problems       int      `json:"problems"`
	Slots          []string `json:"slots"`
	FindingsRaised int      `json:"findings_raised"`
}

// PruneRefusals is what happened to refusals.jsonl.
type PruneRefusals struct {
	DroppedLines int64 `json:"dropped_lines"`
	DroppedBytes int64 `json:"dropped_bytes"`
	KeptLines    int64 `json:"kept_lines"`
}

func (o *pruneOptions) run(ctx context.Context, env *Env) error {
	cfg, err := env.enforcingConfig(o.config)
	if err != nil {
		return err
	}
	p := retention.FromConfig(cfg.Retention)
	rep, err := retention.Run(ctx, record.Store{Dir: cfg.StateDir}, p, env.Now(), retention.Options{DryRun: o.dryRun, Wait: true})
	if errors.Is(err, retention.ErrBusy) {
		return fail(ExitUsage, "prune "+cfg.StateDir, err, "interrupted while waiting for it; retry")
	}
	out := pruneReport(cfg.Retention, rep, o.dryRun)
	var werr error
	if o.json {
		werr = writeJSON(env.Stdout, out)
	} else {
		werr = renderPrune(env.Stdout, out)
	}
	if err != nil {
		return fail(ExitUsage, "prune "+cfg.StateDir, err, "run as root; what was removed is listed above, and the next prune goes on")
	}
	if werr != nil {
		return fail(ExitUsage, "write output", werr, "")
	}
	return nil
}

func pruneReport(r config.Retention, rep retention.Report, dry bool) PruneReport {
	out := PruneReport{DryRun: dry, Removed: []PruneRemoval{}, Mismatched: []PruneMismatch{}, Kept: map[string]int{}, FreedBytes: rep.Freed,
		Limits:   PruneLimits{MaxAge: r.MaxAge.String(), MaxCount: r.MaxCount, MaxBytes: r.MaxBytes.String()},
		Refusals: PruneRefusals{DroppedLines: rep.Refusals.Lines, DroppedBytes: rep.Refusals.Bytes, KeptLines: rep.Refusals.Kept}}
	for _, rm := range rep.Removed {
		out.Removed = append(out.Removed, PruneRemoval{OperationID: rm.ID, Namespace: rm.Namespace, Container: rm.Container,
			Reason: rm.Reason, Bytes: rm.Bytes, FinishedAt: rm.Finished.UTC()})
	}
	for _, m := range rep.Mismatched {
		out.Mismatched = append(out.Mismatched, PruneMismatch{OperationID: m.ID, Namespace: m.Namespace, Container: m.Container,
			Problems: m.Problems, Slots: m.Slots, FindingsRaised: m.Raised})
	}
	for _, k := range rep.Kept {
		out.Kept[k.Keep]++
	}
	for _, k := range rep.Skipped {
		out.Kept[k.Keep]++
	}
	return out
}

func renderPrune(w io.Writer, r PruneReport) error {
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	if len(r.Removed) > 0 {
		tw := table(w)
		row(tw, "", "OPERATION", "CONTAINER", "LIMIT", "SIZE")
		for _, rm := range r.Removed {
			who := "-"
			if rm.Container != "" {
				who = rm.Namespace + "/" + rm.Container
			}
			row(tw, verb, rm.OperationID, safeText(who), rm.Reason, config.ByteSize(rm.Bytes).String())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := renderMismatched(w, r); err != nil {
		return err
	}
	var kept []string
	for _, k := range slices.Sorted(maps.Keys(r.Kept)) {
		kept = append(kept, fmt.Sprintf("%d %s", r.Kept[k], strings.ReplaceAll(k, "_", " ")))
	}
	keptText := ""
	if len(kept) > 0 {
		keptText = "; kept whatever the limits: " + strings.Join(kept, ", ")
	}
	_, err := fmt.Fprintf(w, "%s %s (%s)%s\nrefusals.jsonl: %s %s, %d kept\nlimits: max_age %s, max_count %d, max_bytes %s (0 lifts a limit)\n",
		verb, plural(len(r.Removed), "operation record"), config.ByteSize(r.FreedBytes), keptText,
		verb, plural(int(r.Refusals.DroppedLines), "line"), r.Refusals.KeptLines,
		r.Limits.MaxAge, r.Limits.MaxCount, r.Limits.MaxBytes)
	return err
}

// renderMismatched names each operation kept because its staged products
// no longer match its manifest, and the finding that keeps it.
func renderMismatched(w io.Writer, r PruneReport) error {
	for _, m := range r.Mismatched {
		who := ""
		if m.Container != "" {
			who = " (" + safeText(m.Namespace+"/"+m.Container) + ")"
		}
		flag := "product_mismatch raised (gensee attention list)"
		switch {
		case r.DryRun:
			flag = "product_mismatch not raised (dry run; gensee manifest verify --operation " + m.OperationID + " raises it)"
		case m.FindingsRaised == 0:
			flag = "product_mismatch already open (gensee attention list)"
		}
		var slots []string
		for _, s := range m.Slots {
			slots = append(slots, safeText(s))
		}
		if _, err := fmt.Fprintf(w, "kept %s%s: %s in its staged products (%s): they do not match its manifest; %s\n",
			m.OperationID, who, plural(m.Problems, "problem"), strings.Join(slots, ", "), flag); err != nil {
			return err
		}
	}
	return nil
}
