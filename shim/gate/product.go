package gate

import (
	"fmt"

	"github.com/gensee/gensee/shim/walk"
	"github.com/gensee/gensee/spec"
)

// handler is one declared product during a run. The walk calls root for the
// entry at the product's path, child for every entry below it (bytewise
// depth-first order), and the run calls finish once after the walk (or
// abort when the run fails). Errors are the runtime's own failures
// (staging I/O, cancellation); problems with the container's files are
// violations.
type handler interface {
	base() *product
	begin(g *gater) error
	root(g *gater, v *visit) (descend bool, err error)
	child(g *gater, v *visit) (descend bool, err error)
	finish(g *gater) error
	abort(g *gater)
}

// visit is one walked entry as a handler sees it.
type visit struct {
	e    *walk.Entry
	rel  string // relative to the handler's root ("" at the root)
	path string // workspace-relative; container-absolute outside the workspace
	ch   change // what the entry changed relative to the image
	// before: the entry is as the baseline found it before the start
	// (ch is then chNone): not the workload's.
	before bool
}

// product is the state every class shares.
type product struct {
	decl       spec.Product
	res        *ProductResult
	slot       string
	upath      string // root-relative path the product reads (the workspace for a patch)
	depth      int    // components in upath
	maxBytes   int64
	maxEntries int64
	maxDepth   int
	modes      map[uint32]bool // nil: any
	valid      bool            // declaration usable; invalid products are never walked
	failed     bool            // a violation was recorded: nothing will be staged
	stopped    bool            // a cap was hit: stop reading and descending
	resolved   bool            // the slot or a broken ancestor was seen
	entries    int64
	bytes      int64
}

func (p *product) base() *product { return p }

func (p *product) violate(rule, path, detail string) {
	p.failed = true
	p.res.Violations = addViolation(p.res.Violations, Violation{Rule: rule, Path: path, Detail: detail})
}

// stop records a cap violation and ends reading for this product.
func (p *product) stop(rule, path, detail string) {
	p.violate(rule, path, detail)
	p.stopped = true
}

// ancestor checks an entry on the way to the slot: anything but a real
// directory breaks the path (and is never followed).
func (p *product) ancestor(e *walk.Entry, path string) {
	if e.Kind == walk.KindDir || p.resolved {
		return
	}
	p.resolved = true
	switch e.Kind {
	case walk.KindWhiteout:
		p.violate(RuleMissing, path, "an ancestor of the slot was deleted")
	case walk.KindSymlink:
		p.violate(RuleSymlink, path, "an ancestor of the slot is a symlink; it is not followed")
	default:
		p.violate(RuleWrongType, path, fmt.Sprintf("an ancestor of the slot is a %s, not a directory", e.Kind))
	}
}

// kindOK checks the entry at the slot against the class shape (a regular
// file or a directory) and records the violation when it does not fit.
func (p *product) kindOK(e *walk.Entry, path string, wantDir bool) bool {
	switch {
	case e.Kind == walk.KindWhiteout:
		p.violate(RuleMissing, path, "the slot was deleted in the container")
	case e.Kind == walk.KindSymlink:
		p.violate(RuleSymlink, path, "the slot is a symlink; it is not followed")
	case e.Kind.Special():
		p.violate(RuleSpecialFile, path, fmt.Sprintf("the slot is a %s; it is never opened", e.Kind))
	case wantDir && e.Kind != walk.KindDir:
		p.violate(RuleWrongType, path, fmt.Sprintf("the slot is a %s, want a directory", e.Kind))
	case !wantDir && e.Kind != walk.KindFile:
		p.violate(RuleWrongType, path, fmt.Sprintf("the slot is a %s, want a regular file", e.Kind))
	default:
		return true
	}
	return false
}

// fileOK applies the per-file rules before a byte is read: single link,
// declared mode, bytes within the remaining budget.
func (p *product) fileOK(e *walk.Entry, path string) bool {
	ok := true
	if e.Stat.Nlink > 1 {
		p.violate(RuleHardlink, path, fmt.Sprintf("regular file has %d links; products must have exactly one", e.Stat.Nlink))
		ok = false
	}
	if p.modes != nil && !p.modes[e.Stat.Perm()] {
		p.violate(RuleBadMode, path, fmt.Sprintf("mode %s is not among the declared modes %v", modeString(e.Stat.Perm()), p.decl.Modes))
		ok = false
	}
	if e.Stat.Size > p.maxBytes-p.bytes {
		p.stop(RuleOverMaxBytes, path, fmt.Sprintf("%d bytes would exceed max_bytes %d (already %d); not read", e.Stat.Size, p.maxBytes, p.bytes))
		ok = false
	}
	return ok
}

// freshOK applies the bind-layout fresh rule to one entry (see the package
// comment); the overlay rules are class-specific.
func (p *product) freshOK(g *gater, e *walk.Entry, path string) bool {
	if g.overlay || !e.Stat.Ctime.Before(g.fresh) {
		return true
	}
	p.violate(RulePartial, path, "unchanged since before the task started (bind layout: ctime predates the start); it came from the image")
	return false
}
