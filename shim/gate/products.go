package gate

import (
	"fmt"
	"strings"

	"github.com/gensee/gensee/spec"
)

// plan builds one handler per declared product. Declarations the gate
// cannot honour become violations and the product is not walked.
func (g *gater) plan(decls []spec.Product) {
	for i := range decls {
		d := decls[i]
		b := &product{decl: d, slot: d.Slot, res: &ProductResult{Slot: d.Slot, Class: d.Class}}
		h := g.newHandler(b)
		g.handlers = append(g.handlers, h)
		g.validate(h)
	}
	g.checkOverlaps()
	for _, h := range g.handlers {
		b := h.base()
		if !b.valid {
			continue
		}
		if _, ok := h.(*patchProduct); ok {
			g.patches++
		} else {
			g.markAncestors(b.upath, false)
		}
	}
}

func (g *gater) newHandler(b *product) handler {
	switch b.decl.Class {
	case spec.ClassBlob, spec.ClassStructuredResult, spec.ClassEnvironmentSnapshot:
		return &fileProduct{product: b}
	case spec.ClassBlobSet, spec.ClassDirectoryTree:
		return &treeProduct{product: b}
	case spec.ClassWorkspacePatch:
		return &patchProduct{product: b}
	}
	return &unknownProduct{product: b}
}

// validate checks one declaration and fills in caps and paths.
func (g *gater) validate(h handler) {
	b := h.base()
	d := b.decl
	b.valid = true
	bad := func(rule, detail string) { b.violate(rule, d.Slot, detail); b.valid = false }
	if _, ok := h.(*unknownProduct); ok {
		bad(RuleUnknownClass, fmt.Sprintf("class %q is not one of blob, blob_set, directory_tree, workspace_patch, structured_result, environment_snapshot", d.Class))
	}
	if err := checkRel(d.Slot); err != nil {
		bad(RuleBadSlot, fmt.Sprintf("slot must be an exact relative path: %v", err))
		return
	}
	if d.MaxBytes < 0 || d.MaxEntries < 0 || d.MaxDepth < 0 {
		bad(RuleBadContract, "negative max_bytes, max_entries or max_depth")
	}
	modes, err := parseModes(d.Modes)
	if err != nil {
		bad(RuleBadContract, err.Error())
	}
	b.modes = modes
	b.maxBytes = orDefault(d.MaxBytes, DefaultMaxBytes)
	b.maxEntries = orDefault(d.MaxEntries, DefaultMaxEntries)
	b.maxDepth = int(min(orDefault(int64(d.MaxDepth), DefaultMaxDepth), MaxDepthCeiling))
	if d.Class == spec.ClassWorkspacePatch {
		b.upath = g.ws // the patch reads the whole workspace; its slot names the staged file
	} else {
		b.upath = joinRel(g.ws, d.Slot)
		for _, c := range strings.Split(d.Slot, "/") {
			if g.excl[c] {
				bad(RuleExcluded, fmt.Sprintf("slot passes through excluded component %q; excluded paths are never staged", c))
				break
			}
		}
	}
	for m := range g.mounts {
		if under(b.upath, m) {
			bad(RuleUnderMount, fmt.Sprintf("slot is under mount destination /%s, which the gate cannot read; move the slot or the mount", m))
			break
		}
	}
	b.depth = 0
	if b.upath != "" {
		b.depth = strings.Count(b.upath, "/") + 1
	}
}

// checkOverlaps fails every pair of products whose slots are equal or
// nested: both would claim (and stage) the same paths.
func (g *gater) checkOverlaps() {
	for i, hi := range g.handlers {
		a := hi.base()
		for _, hj := range g.handlers[i+1:] {
			b := hj.base()
			if checkRel(a.slot) != nil || checkRel(b.slot) != nil {
				continue
			}
			if under(a.slot, b.slot) || under(b.slot, a.slot) {
				a.violate(RuleOverlappingSlot, a.slot, fmt.Sprintf("overlaps slot %q", b.slot))
				b.violate(RuleOverlappingSlot, b.slot, fmt.Sprintf("overlaps slot %q", a.slot))
				a.valid, b.valid = false, false
			}
		}
	}
}

// unknownProduct is a declaration with a class the gate does not know; it
// always fails and is never walked.
type unknownProduct struct{ *product }

func (u *unknownProduct) begin(*gater) error                 { return nil }
func (u *unknownProduct) root(*gater, *visit) (bool, error)  { return false, nil }
func (u *unknownProduct) child(*gater, *visit) (bool, error) { return false, nil }
func (u *unknownProduct) finish(g *gater) error              { return u.settle(g, false) }
func (u *unknownProduct) abort(*gater)                       {}
