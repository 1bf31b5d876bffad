package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
)

type manifestVerifyOptions struct {
	ref opRef
}

func manifestVerifyCommand() *Command {
	return &Command{
		Name:       "verify",
		Summary:    "re-hash an operation's staged products against its manifest",
		Args:       opRefArgs,
		Positional: opRefPositional,
		Long: `Reads the operation's manifest (as manifest show does) and checks every
staged copy under <state_dir>/operations/<opid>/staged against it, reading
through file descriptors that never follow a symlink: each single-file
product and workspace patch by sha256 (and size), each directory product
entry by type, sha256, size and symlink target, and each directory
product's tree digest recomputed over what is staged. A product that failed
the gate must have nothing staged, and nothing may be staged that the
manifest does not list.

Prints "verified: N files" and exits 0 when all match. Otherwise prints one
line per problem on stdout,
  <path>: <what>: expected <value>, actual <value>
(what is sha256, size, type, target, tree digest, missing, extra, or
staged although the product failed) and exits 1. A manifest line about the
record itself starts with "manifest:". Unreadable records exit 2.

A problem is evidence that a boundary failed: for each product with one
(and each staged path no product lists) verify appends a product_mismatch
event to the operation's events.jsonl and raises the operation's attention
with the signature product_mismatch (gensee attention list shows it), once
per distinct problem: running verify again on the same damage adds
nothing. This never changes the exit code; when it cannot be recorded,
stderr says why.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o manifestVerifyOptions
			o.ref.flags(fs)
			return o.run
		},
	}
}

func (o *manifestVerifyOptions) run(_ context.Context, env *Env) error {
	op, err := o.ref.load(env, env.Stderr)
	if err != nil {
		return err
	}
	rep, err := gate.VerifyStaged(op.dir, op.m.Products)
	if err != nil {
		return fail(ExitUsage, "verify staged products of operation "+op.id, err, "check that the state dir is readable (it is root's)")
	}
	lines, bySlot := mismatchLines(op.dir, rep.Mismatches)
	for _, l := range lines {
		fmt.Fprintln(env.Stdout, l)
	}
	if n := len(lines); n > 0 {
		raiseMismatch(env, op, bySlot, env.Now())
		return fail(ExitRefused, "operation "+op.id,
			fmt.Errorf("%d problem(s), listed on stdout: the staged products do not match the manifest", n),
			"do not use them; keep the operation directory for investigation")
	}
	fmt.Fprintf(env.Stdout, "verified: %d files of %d staged product(s) match %s\n",
		rep.Files, rep.Products, filepath.Join(op.dir, record.ManifestFile))
	return nil
}

// mismatchLines renders what gate.VerifyStaged found: one stdout line per
// mismatch, "<path>: <what>: expected <value>, actual <value>" with the
// path under opDir and every recorded string made safe for a terminal, or
// "manifest: <sentence>"; and the same problems grouped by slot for the
// attention, paths relative to the operation and digests named as such.
func mismatchLines(opDir string, ms []gate.Mismatch) ([]string, *slotProblems) {
	var lines []string
	bySlot := &slotProblems{}
	for _, m := range ms {
		if m.Record != "" {
			line := "manifest: " + safeText(m.Record)
			lines = append(lines, line)
			bySlot.add(m.Slot, line)
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %s: expected %s, actual %s",
			safeText(filepath.Join(opDir, m.Path)), m.What, safeText(m.Expected), safeText(m.Actual)))
		bySlot.add(m.Slot, fmt.Sprintf("%s: %s: expected %s, actual %s", m.Path, m.What, digestText(m.Expected), digestText(m.Actual)))
	}
	return lines, bySlot
}
