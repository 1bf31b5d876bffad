package gate

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// What a Mismatch is about.
const (
	MismatchSHA256       = "sha256"
	MismatchSize         = "size"
	MismatchType         = "type"
	MismatchTarget       = "target" // a symlink's target string
	MismatchTreeDigest   = "tree digest"
	MismatchMissing      = "missing"
	MismatchExtra        = "extra" // staged, but no product lists it
	MismatchStagedFailed = "staged although the product failed the gate"
)

// Mismatch is one way a staged tree differs from the manifest that
// describes it. Either Record is set (the manifest's record itself cannot be
// checked: a passing product without a staged path, a path that escapes)
// or Path, What, Expected and Actual are.
type Mismatch struct {
	// Slot is the product the mismatch belongs to; for a staged path no
	// product lists, that path below staged/.
	Slot string
	// Path is below the operation directory, '/'-separated and clean
	// ("staged/out/result.json").
	Path     string
	What     string // a Mismatch* kind
	Expected string // a digest is bare hex, as the manifest records it
	Actual   string
	Record   string // a sentence about the manifest record; the rest is empty
}

// StagedReport is what VerifyStaged found.
type StagedReport struct {
	Mismatches []Mismatch // in the order found: products in manifest order, then extras
	Files      int        // non-directory objects hashed
	Products   int        // passing products checked
}

// VerifyStaged checks the staged copies below operation directory opDir
// (its record.StagedDir, as Run staged them for the manifest's products)
// against products, reading through file descriptors that never follow a
// symlink: each single-file product and workspace patch by sha256 (and
// size), each directory product entry by type, sha256, size and symlink
// target, and each directory product's tree digest (TreeDigest) recomputed
// over what is staged with the modes the record holds. A product that
// failed the gate must have nothing staged, and nothing may be staged that
// no product lists. Every difference is a Mismatch, never an error: the
// error is for a tree that cannot be read (or is past the walk's bounds).
func VerifyStaged(opDir string, products []spec.ProductRecord) (*StagedReport, error) {
	d, err := openOpDir(opDir)
	if err != nil {
		return nil, err
	}
	defer d.close()
	v := &verifier{d: d, expected: map[string]bool{}, ancestors: map[string]bool{}, reported: map[string]bool{},
		rep: &StagedReport{}}
	for i, p := range products {
		v.slot = p.Slot
		if err := v.product(i, p); err != nil {
			return nil, err
		}
	}
	if err := v.extras(); err != nil {
		return nil, err
	}
	return v.rep, nil
}

// TreeClass reports whether a product class is a directory of entries
// whose manifest record carries a tree digest.
func TreeClass(class string) bool {
	return class == spec.ClassBlobSet || class == spec.ClassDirectoryTree
}

// EntryRel is an entry's path relative to its slot. The gate records entry
// paths workspace-relative (slot included); TreeDigest strips the slot the
// same way, so a path already relative to the slot is kept as is.
func EntryRel(slot, p string) string {
	return strings.TrimPrefix(p, slot+"/")
}

// verifier checks one operation's staged/ directory against its manifest.
// Paths it handles are relative to the operation directory and clean.
type verifier struct {
	d         *opDirFD
	expected  map[string]bool // paths the manifest accounts for
	ancestors map[string]bool // directories on the way to them
	reported  map[string]bool // failed products' paths already reported as staged
	slot      string          // the product being checked
	rep       *StagedReport
}

func (v *verifier) problem(rel, what, expected, actual string) {
	v.rep.Mismatches = append(v.rep.Mismatches, Mismatch{Slot: v.slot, Path: rel, What: what, Expected: expected, Actual: actual})
}

func (v *verifier) recordProblem(format string, args ...any) {
	v.rep.Mismatches = append(v.rep.Mismatches, Mismatch{Slot: v.slot, Record: fmt.Sprintf(format, args...)})
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
		v.recordProblem("%s passed the gate but records no staged path", at)
		return nil
	}
	if !cleanRel(p.Staged) || !strings.HasPrefix(p.Staged, record.StagedDir+"/") {
		v.recordProblem("%s staged path %q is not a clean path under %s/", at, p.Staged, record.StagedDir)
		return nil
	}
	v.rep.Products++
	if TreeClass(p.Class) {
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
		v.problem(loc, MismatchMissing, "file sha256 "+orNone(p.SHA256), "nothing staged")
		return nil
	case err != nil:
		return err
	case o.kind != "file":
		v.problem(loc, MismatchType, "file", o.String())
		return nil
	}
	v.rep.Files++
	if p.SHA256 == "" {
		v.problem(loc, MismatchSHA256, "a digest recorded in the manifest", "none recorded (staged "+o.sha256+")")
	} else if o.sha256 != p.SHA256 {
		v.problem(loc, MismatchSHA256, p.SHA256, o.sha256)
	}
	if p.Class != spec.ClassWorkspacePatch && o.size != p.Bytes {
		v.problem(loc, MismatchSize, strconv.FormatInt(p.Bytes, 10), strconv.FormatInt(o.size, 10))
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
		v.problem(loc, MismatchMissing, "dir", "nothing staged")
	case err != nil:
		return err
	case o.kind != "dir":
		v.problem(loc, MismatchType, "dir", o.String())
	}
	var seen []Entry
	for j, e := range p.Entries {
		rel := EntryRel(p.Slot, e.Path)
		if !cleanRel(rel) {
			v.recordProblem("%s entries[%d] path %q is not a clean path below the slot", at, j, e.Path)
			continue
		}
		o, ok, err := v.entry(path.Join(loc, rel), e)
		if err != nil {
			return err
		}
		if ok {
			seen = append(seen, Entry{Path: e.Path, Type: o.kind, Mode: e.Mode, Size: o.size, SHA256: o.sha256})
		}
	}
	got := TreeDigest(p.Slot, seen)
	switch {
	case p.TreeDigest == "":
		v.problem(loc, MismatchTreeDigest, "a digest recorded in the manifest", "none recorded (staged "+got+")")
	case got != p.TreeDigest:
		v.problem(loc, MismatchTreeDigest, p.TreeDigest, got)
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
		v.problem(at, MismatchMissing, describeEntry(e), "nothing staged")
		return o, false, nil
	case err != nil:
		return o, false, err
	case o.kind != e.Type:
		v.problem(at, MismatchType, e.Type, o.String())
		return o, false, nil
	}
	if o.kind == "dir" {
		return o, true, nil
	}
	v.rep.Files++
	if o.sha256 != e.SHA256 {
		v.problem(at, MismatchSHA256, orNone(e.SHA256), o.sha256)
	}
	if o.size != e.Size {
		v.problem(at, MismatchSize, strconv.FormatInt(e.Size, 10), strconv.FormatInt(o.size, 10))
	}
	if o.kind == "symlink" && o.target != e.Target {
		v.problem(at, MismatchTarget, strconv.Quote(e.Target), strconv.Quote(o.target))
	}
	return o, true, nil
}

func describeEntry(e spec.EntryRecord) string {
	if e.Type == "dir" {
		return "dir"
	}
	return e.Type + " sha256 " + orNone(e.SHA256)
}

func orNone(digest string) string {
	if digest == "" {
		return "(none recorded)"
	}
	return digest
}

// failed checks that a product the gate failed left nothing staged.
func (v *verifier) failed(at string, p spec.ProductRecord) error {
	if p.Staged != "" {
		v.recordProblem("%s failed the gate but records staged path %q", at, p.Staged)
	}
	if !cleanRel(p.Slot) {
		v.recordProblem("%s slot %q is not a clean relative path", at, p.Slot)
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
	v.problem(loc, MismatchStagedFailed, "nothing", o.String())
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
		v.problem(record.StagedDir, MismatchType, "dir", o.String())
		return nil
	}
	return v.d.walkTree(record.StagedDir, func(rel string, inspect func() (stagedObj, error)) (bool, error) {
		v.slot = strings.TrimPrefix(rel, record.StagedDir+"/")
		switch {
		case v.expected[rel] || v.ancestors[rel]:
			return true, nil // read and compared already: not hashed again
		case v.reported[rel]:
			return false, nil
		}
		o, err := inspect()
		if err != nil {
			return false, err
		}
		v.problem(rel, MismatchExtra, "nothing (not in the manifest)", o.String())
		return true, nil
	})
}

// cleanRel reports whether p is a clean relative path that stays below
// its base.
func cleanRel(p string) bool {
	return p != "" && p != "." && !strings.HasPrefix(p, "/") && path.Clean(p) == p &&
		p != ".." && !strings.HasPrefix(p, "../")
}
