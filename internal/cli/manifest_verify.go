package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
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
	v, err := verifyStaged(op)
	if err != nil {
		return fail(ExitUsage, "verify staged products of operation "+op.id, err, "check that the state dir is readable (it is root's)")
	}
	for _, l := range v.problems {
		fmt.Fprintln(env.Stdout, l)
	}
	if n := len(v.problems); n > 0 {
		raiseMismatch(env, op, v.bySlot, env.Now())
		return fail(ExitRefused, "operation "+op.id,
			fmt.Errorf("%d problem(s), listed on stdout: the staged products do not match the manifest", n),
			"do not use them; keep the operation directory for investigation")
	}
	fmt.Fprintf(env.Stdout, "verified: %d files of %d staged product(s) match %s\n",
		v.files, v.staged, filepath.Join(op.dir, record.ManifestFile))
	return nil
}

// verifier checks one operation's staged/ directory against its manifest.
// Paths it handles are relative to the operation directory and clean.
type verifier struct {
	d         *opDirFD
	expected  map[string]bool // paths the manifest accounts for
	ancestors map[string]bool // directories on the way to them
	reported  map[string]bool // failed products' paths already reported as staged
	problems  []string
	slot      string        // the product being checked, for bySlot
	bySlot    *slotProblems // problems grouped for the attention
	files     int           // non-directory objects hashed
	staged    int           // passing products checked
}

func verifyStaged(op *operation) (*verifier, error) {
	d, err := openOpDir(op.dir)
	if err != nil {
		return nil, err
	}
	defer d.close()
	v := &verifier{d: d, expected: map[string]bool{}, ancestors: map[string]bool{}, reported: map[string]bool{},
		bySlot: &slotProblems{}}
	for i, p := range op.m.Products {
		v.slot = p.Slot
		if err := v.product(i, p); err != nil {
			return nil, err
		}
	}
	return v, v.extras()
}

func (v *verifier) problem(rel, what, expected, actual string) {
	v.problems = append(v.problems, fmt.Sprintf("%s: %s: expected %s, actual %s",
		safeText(filepath.Join(v.d.path, rel)), what, safeText(expected), safeText(actual)))
	v.bySlot.add(v.slot, fmt.Sprintf("%s: %s: expected %s, actual %s", rel, what, digestText(expected), digestText(actual)))
}

func (v *verifier) manifestProblem(format string, args ...any) {
	line := "manifest: " + safeText(fmt.Sprintf(format, args...))
	v.problems = append(v.problems, line)
	v.bySlot.add(v.slot, line)
}

func (v *verifier) expect(rel string) {
	v.expected[rel] = true
	for d := path.Dir(rel); d != "." && !v.ancestors[d]; d = path.Dir(d) {
		v.ancestors[d] = true
	}
}

func (v *verifier) product(i int, p spec.ProductRecord) error {
	at := fmt.Sprintf("products[%d] (%s)", i, p.Slot)
	if p.Verdict != spec.VerdictPass {
		return v.failed(at, p)
	}
	if p.Staged == "" {
		v.manifestProblem("%s passed the gate but records no staged path", at)
		return nil
	}
	if !cleanRel(p.Staged) || !strings.HasPrefix(p.Staged, record.StagedDir+"/") {
		v.manifestProblem("%s staged path %q is not a clean path under %s/", at, p.Staged, record.StagedDir)
		return nil
	}
	v.staged++
	if treeClass(p.Class) {
		return v.tree(at, p)
	}
	return v.single(p)
}

// single checks a one-file product or a workspace patch. A patch's Bytes
// counts the file contents inside it, not the patch file, so only its
// digest is compared.
func (v *verifier) single(p spec.ProductRecord) error {
	loc := p.Staged
	v.expect(loc)
	o, err := v.d.inspect(loc)
	switch {
	case errors.Is(err, errAbsent):
		v.problem(loc, "missing", "file sha256 "+orText(p.SHA256, "(none recorded)"), "nothing staged")
		return nil
	case err != nil:
		return err
	case o.kind != "file":
		v.problem(loc, "type", "file", o.String())
		return nil
	}
	v.files++
	if p.SHA256 == "" {
		v.problem(loc, "sha256", "a digest recorded in the manifest", "none recorded (staged "+o.sha256+")")
	} else if o.sha256 != p.SHA256 {
		v.problem(loc, "sha256", p.SHA256, o.sha256)
	}
	if p.Class != spec.ClassWorkspacePatch && o.size != p.Bytes {
		v.problem(loc, "size", strconv.FormatInt(p.Bytes, 10), strconv.FormatInt(o.size, 10))
	}
	return nil
}

// tree checks every entry of a directory product and recomputes its tree
// digest over what is staged, with the modes the manifest records (staged
// copies drop setuid, setgid and group/other write, so the original mode
// is only in the record).
func (v *verifier) tree(at string, p spec.ProductRecord) error {
	loc := p.Staged
	v.expect(loc)
	switch o, err := v.d.inspect(loc); {
	case errors.Is(err, errAbsent):
		v.problem(loc, "missing", "dir", "nothing staged")
	case err != nil:
		return err
	case o.kind != "dir":
		v.problem(loc, "type", "dir", o.String())
	}
	var seen []gate.Entry
	for j, e := range p.Entries {
		rel := entryRel(p.Slot, e.Path)
		if !cleanRel(rel) {
			v.manifestProblem("%s entries[%d] path %q is not a clean path below the slot", at, j, e.Path)
			continue
		}
		o, ok, err := v.entry(path.Join(loc, rel), e)
		if err != nil {
			return err
		}
		if ok {
			seen = append(seen, gate.Entry{Path: e.Path, Type: o.kind, Mode: e.Mode, Size: o.size, SHA256: o.sha256})
		}
	}
	got := gate.TreeDigest(p.Slot, seen)
	switch {
	case p.TreeDigest == "":
		v.problem(loc, "tree digest", "a digest recorded in the manifest", "none recorded (staged "+got+")")
	case got != p.TreeDigest:
		v.problem(loc, "tree digest", p.TreeDigest, got)
	}
	return nil
}

// entry checks one entry of a directory product; ok is false when nothing
// of the recorded type is there.
func (v *verifier) entry(at string, e spec.EntryRecord) (stagedObj, bool, error) {
	v.expect(at)
	o, err := v.d.inspect(at)
	switch {
	case errors.Is(err, errAbsent):
		v.problem(at, "missing", describeEntry(e), "nothing staged")
		return o, false, nil
	case err != nil:
		return o, false, err
	case o.kind != e.Type:
		v.problem(at, "type", e.Type, o.String())
		return o, false, nil
	}
	if o.kind == "dir" {
		return o, true, nil
	}
	v.files++
	if o.sha256 != e.SHA256 {
		v.problem(at, "sha256", orText(e.SHA256, "(none recorded)"), o.sha256)
	}
	if o.size != e.Size {
		v.problem(at, "size", strconv.FormatInt(e.Size, 10), strconv.FormatInt(o.size, 10))
	}
	if o.kind == "symlink" && o.target != e.Target {
		v.problem(at, "target", strconv.Quote(e.Target), strconv.Quote(o.target))
	}
	return o, true, nil
}

func describeEntry(e spec.EntryRecord) string {
	if e.Type == "dir" {
		return "dir"
	}
	return e.Type + " sha256 " + orText(e.SHA256, "(none recorded)")
}

// failed checks that a product the gate failed left nothing staged.
func (v *verifier) failed(at string, p spec.ProductRecord) error {
	if p.Staged != "" {
		v.manifestProblem("%s failed the gate but records staged path %q", at, p.Staged)
	}
	if !cleanRel(p.Slot) {
		v.manifestProblem("%s slot %q is not a clean relative path", at, p.Slot)
		return nil
	}
	loc := path.Join(record.StagedDir, p.Slot)
	o, err := v.d.inspect(loc)
	switch {
	case errors.Is(err, errAbsent):
		return nil
	case err != nil:
		return err
	}
	v.reported[loc] = true
	v.problem(loc, "staged although the product failed the gate", "nothing", o.String())
	return nil
}

// extras walks staged/ and reports everything the manifest does not list.
func (v *verifier) extras() error {
	o, err := v.d.inspect(record.StagedDir)
	switch {
	case errors.Is(err, errAbsent):
		return nil // nothing staged; anything expected was reported missing
	case err != nil:
		return err
	case o.kind != "dir":
		v.problem(record.StagedDir, "type", "dir", o.String())
		return nil
	}
	return v.d.walk(record.StagedDir, func(rel string, o stagedObj) (bool, error) {
		v.slot = strings.TrimPrefix(rel, record.StagedDir+"/")
		switch {
		case v.expected[rel] || v.ancestors[rel]:
			return true, nil
		case v.reported[rel]:
			return false, nil
		}
		v.problem(rel, "extra", "nothing (not in the manifest)", o.String())
		return true, nil
	})
}

// cleanRel reports whether p is a clean relative path that stays below
// its base.
func cleanRel(p string) bool {
	return p != "" && p != "." && !strings.HasPrefix(p, "/") && path.Clean(p) == p &&
		p != ".." && !strings.HasPrefix(p, "../")
}
