package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/verify"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// verifyTally counts what verify --all found, operation by operation.
type verifyTally struct {
	match, mismatch, invalid, unreadable int
	unstaged, running                    int // not checked
}

// runAll re-verifies every operation of the state dir that has staged
// products: the single form's check and attention, once per operation, so
// a timer catches damage no person looked for.
func (o *manifestVerifyOptions) runAll(ctx context.Context, env *Env) error {
	if err := o.ref.exclusiveOfAll(); err != nil {
		return err
	}
	cfg, err := env.operatorConfig(o.ref.config)
	if err != nil {
		return err
	}
	st := record.Store{Dir: cfg.StateDir}
	ids, err := st.Operations()
	if err != nil {
		return fail(ExitUsage, "list operations in "+cfg.StateDir, err, "run as root, with --config F naming the runtime's config")
	}
	var t verifyTally
	for _, id := range ids {
		if ctx.Err() != nil {
			return fail(ExitUsage, "--all", ctx.Err(), "interrupted; run it again")
		}
		verifyListed(env, st, id, cfg.NotifyCommand, &t)
	}
	fmt.Fprintf(env.Stdout, "verified %s: %d match, %d do not match, %d invalid manifest(s), %d could not be read; "+
		"not checked: %d without staged products, %d without a manifest (running)\n",
		plural(t.match+t.mismatch+t.invalid+t.unreadable, "operation"), t.match, t.mismatch, t.invalid, t.unreadable, t.unstaged, t.running)
	switch {
	case t.mismatch+t.invalid > 0:
		return fail(ExitRefused, "--all", fmt.Errorf("%s whose staged products do not match the manifest (or whose manifest is invalid), listed on stdout",
			plural(t.mismatch+t.invalid, "operation")), "do not use their products; keep the operation directories for investigation")
	case t.unreadable > 0:
		return fail(ExitUsage, "--all", fmt.Errorf("%s could not be read, listed on stdout", plural(t.unreadable, "operation")),
			"run as root; the others were checked")
	}
	return nil
}

// exclusiveOfAll refuses --all together with a flag that names one
// operation.
func (r *opRef) exclusiveOfAll() error {
	var named []string
	if r.fs != nil {
		r.fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "container", "operation", "namespace", "n":
				named = append(named, "--"+f.Name)
			}
		})
	}
	if len(named) > 0 || r.container != "" {
		return errUsage("--all checks every operation; it excludes --container, --operation, -n and an ID argument")
	}
	return nil
}

// verifyListed checks operation id as the single form does and prints its
// result line (then its problems) on stdout, counting it in t.
func verifyListed(env *Env, st record.Store, id string, notifyArgv []string, t *verifyTally) {
	dir, err := st.OperationDir(id)
	if err != nil {
		return // not an operation id: Operations lists none
	}
	op := &operation{stateDir: st.Dir, id: id, dir: dir, notify: notifyArgv}
	raw, err := readRecord(dir, record.ManifestFile, spec.MaxManifestBytes)
	switch {
	case errors.Is(err, unix.ENOENT):
		t.running++
		return
	case err != nil:
		t.unreadable++
		fmt.Fprintf(env.Stdout, "operation %s: cannot read manifest: %s\n", id, safeText(err.Error()))
		return
	}
	if op.m, err = spec.ParseManifest(raw); err != nil {
		t.invalid++
		fmt.Fprintf(env.Stdout, "operation %s: invalid manifest %s: %s\n", id, filepath.Join(dir, record.ManifestFile), safeText(err.Error()))
		return
	}
	if !verify.ListsStaged(op.m.Products) {
		t.unstaged++
		return
	}
	op.who = admittedContainer(dir)
	name := "operation " + id
	if op.who != "" {
		name += " (" + safeText(op.who) + ")"
	}
	res, err := verify.Staged(dir, op.m.Products)
	switch {
	case err != nil:
		t.unreadable++
		fmt.Fprintf(env.Stdout, "%s: cannot verify: %s\n", name, safeText(err.Error()))
	case res.OK():
		t.match++
		fmt.Fprintf(env.Stdout, "%s: verified: %d files of %d staged product(s)\n", name, res.Files, res.Products)
	default:
		t.mismatch++
		fmt.Fprintf(env.Stdout, "%s: %d problem(s): the staged products do not match the manifest\n", name, res.Problems())
		printProblems(env, dir, res)
		raiseMismatch(env, op, res, env.Now())
	}
}
