package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/verify"
)

type manifestVerifyOptions struct {
	ref opRef
	all bool
}

func manifestVerifyCommand() *Command {
	return &Command{
		Name:       "verify",
		Summary:    "re-hash an operation's staged products against its manifest",
		Args:       opRefArgs + " | --all [--config F]",
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
stderr says why.

--all re-verifies every operation of the state dir whose manifest lists a
staged product (for a timer: contrib/systemd/gensee-verify.timer runs it
hourly), raising attention as above. Per operation it prints
  operation <opid> (<ns>/<container>): verified: N files of M staged product(s)
or
  operation <opid> (<ns>/<container>): N problem(s): the staged products do not match the manifest
followed by its problem lines, or "operation <opid>: invalid manifest:
..." or "...: cannot verify: ..."; then one summary line. It exits 1 when
any operation's products do not match (or its manifest is invalid), else 2
when one could not be read, else 0. Operations without a manifest (still
running) or without staged products are counted, not checked. The runtime
re-verifies an operation the same way before retention removes it, and
keeps it when its products do not match.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o manifestVerifyOptions
			o.ref.flags(fs)
			fs.BoolVar(&o.all, "all", false, "re-verify every operation of the state dir that has staged products")
			return o.run
		},
	}
}

func (o *manifestVerifyOptions) run(ctx context.Context, env *Env) error {
	if o.all {
		return o.runAll(ctx, env)
	}
	op, err := o.ref.load(env, env.Stderr)
	if err != nil {
		return err
	}
	res, err := verify.Staged(op.dir, op.m.Products)
	if err != nil {
		return fail(ExitUsage, "verify staged products of operation "+op.id, err, "check that the state dir is readable (it is root's)")
	}
	printProblems(env, op.dir, res)
	if !res.OK() {
		raiseMismatch(env, op, res, env.Now())
		return fail(ExitRefused, "operation "+op.id,
			fmt.Errorf("%d problem(s), listed on stdout: the staged products do not match the manifest", res.Problems()),
			"do not use them; keep the operation directory for investigation")
	}
	fmt.Fprintf(env.Stdout, "verified: %d files of %d staged product(s) match %s\n",
		res.Files, res.Products, filepath.Join(op.dir, record.ManifestFile))
	return nil
}

// printProblems writes one stdout line per problem, "<path>: <what>:
// expected <value>, actual <value>" with the path under opDir and every
// recorded string made safe for a terminal, or "manifest: <sentence>".
func printProblems(env *Env, opDir string, res *verify.Result) {
	for _, m := range res.Mismatches {
		fmt.Fprintln(env.Stdout, verify.PathLine(opDir, m))
	}
}
