package spec

import (
	"fmt"
	"strings"
)

// singleFile reports whether a product class is one regular file at its
// slot (as opposed to a set or tree of entries).
func singleFile(class string) bool {
	return class == ClassBlob || class == ClassStructuredResult || class == ClassEnvironmentSnapshot
}

func knownClass(class string) bool {
	switch class {
	case ClassBlob, ClassBlobSet, ClassDirectoryTree, ClassWorkspacePatch, ClassStructuredResult, ClassEnvironmentSnapshot:
		return true
	}
	return false
}

// ExcludedName reports whether a path segment names something the gate
// never stages (docs/design.md §4: .git, target, node_modules). A slot may not
// contain such a segment, since its product could never pass.
func ExcludedName(name string) bool {
	switch name {
	case ".git", "target", "node_modules":
		return true
	}
	return false
}

// checkProducts validates products and the relations between them.
func checkProducts(p problems, products []Product) {
	if len(products) > maxProducts {
		p.addf("products", "has %d products, at most %d allowed", len(products), maxProducts)
		return
	}
	patch := -1
	for i, pr := range products {
		path := joinIndex("products", i)
		pr.check(p.at(path))
		if pr.Class == ClassWorkspacePatch {
			if patch >= 0 {
				p.addf(joinKey(path, "class"), "a contract has at most one workspace_patch (it covers the whole workspace); products[%d] is one", patch)
			} else {
				patch = i
			}
		}
		for j, other := range products[:i] {
			switch {
			case pr.Slot == "" || other.Slot == "":
			case pr.Slot == other.Slot:
				p.addf(joinKey(path, "slot"), "%q duplicates products[%d].slot", pr.Slot, j)
			case strings.HasPrefix(pr.Slot, other.Slot+"/"):
				p.addf(joinKey(path, "slot"), "%q is inside products[%d].slot %q; each path belongs to one product", pr.Slot, j, other.Slot)
			case strings.HasPrefix(other.Slot, pr.Slot+"/"):
				p.addf(joinKey(path, "slot"), "%q contains products[%d].slot %q; each path belongs to one product", pr.Slot, j, other.Slot)
			}
		}
	}
}

func (pr *Product) check(p problems) {
	switch {
	case pr.Class == "":
		p.add("class", "is required: one of blob, blob_set, directory_tree, workspace_patch, structured_result, environment_snapshot")
	case !knownClass(pr.Class):
		p.addf("class", "%q is not a product class: use blob, blob_set, directory_tree, workspace_patch, structured_result or environment_snapshot", truncate(pr.Class, 80))
	}
	if msg := checkSlot(pr.Slot); msg != "" {
		p.add("slot", msg)
	}
	limits := []struct {
		name string
		v    int64
	}{{"max_entries", pr.MaxEntries}, {"max_bytes", pr.MaxBytes}, {"max_depth", int64(pr.MaxDepth)}}
	for _, l := range limits {
		if l.v < 0 {
			p.addf(l.name, "%d must not be negative (0 or absent means the gate's default)", l.v)
		}
	}
	if singleFile(pr.Class) {
		for _, f := range []struct {
			name string
			set  bool
		}{{"max_entries", pr.MaxEntries != 0}, {"max_depth", pr.MaxDepth != 0}, {"allow_symlinks", pr.AllowSymlinks}} {
			if f.set {
				p.addf(f.name, "does not apply to %s, which is a single regular file; remove it", pr.Class)
			}
		}
	}
	if len(pr.Modes) > maxModes {
		p.addf("modes", "has %d modes, at most %d allowed", len(pr.Modes), maxModes)
	}
	seen := map[string]int{}
	for i, m := range pr.Modes {
		path := joinIndex("modes", i)
		if !isMode(m) {
			p.addf(path, `%q is not an octal mode: write four digits such as "0644"`, truncate(m, 80))
		} else if j, dup := seen[m]; dup {
			p.addf(path, "%q duplicates modes[%d]", m, j)
		}
		seen[m] = i
	}
}

// checkSlot returns why slot is not an exact clean relative path, or "".
func checkSlot(slot string) string {
	q := fmt.Sprintf("%q", truncate(slot, 80))
	switch {
	case slot == "":
		return "is required: a path relative to the workspace, such as \"out/result.json\""
	case len(slot) > maxPathLen:
		return fmt.Sprintf("is %d bytes, at most %d allowed", len(slot), maxPathLen)
	case strings.HasPrefix(slot, "/"):
		return q + " must be relative to the workspace, not absolute"
	case strings.ContainsFunc(slot, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return q + " contains a control character"
	}
	for _, seg := range strings.Split(slot, "/") {
		switch {
		case seg == "":
			return q + ` has an empty segment (trailing or doubled "/")`
		case seg == ".":
			return q + ` has a "." segment; write the path without it`
		case seg == "..":
			return q + ` contains ".."; a slot may not leave the workspace`
		case ExcludedName(seg):
			return fmt.Sprintf("%s is under %q, which the gate never stages", q, seg)
		}
	}
	return ""
}
