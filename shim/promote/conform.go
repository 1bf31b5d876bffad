package promote

import (
	"fmt"
	"strconv"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/spec"
)

// conform says how items (a product as copied or found, readObject's
// order) differ from the manifest's record of it, or "" when they do not:
// a single-file class or a workspace patch is one regular file with the
// record's sha256 (and, but for a patch, whose Bytes count what is inside
// it, its size); a directory class is a directory whose entries are the
// record's, each by type, size, sha256 and symlink target, and whose tree
// digest over the record's modes (gate.TreeDigest, as the gate computed
// it) is the record's.
func conform(items []item, pr *spec.ProductRecord) string {
	if len(items) == 0 {
		return "nothing was read"
	}
	root := items[0]
	if !gate.TreeClass(pr.Class) {
		switch {
		case len(items) != 1 || root.typ != "file":
			return fmt.Sprintf("a %s where the manifest records a file", root.typ)
		case root.sha256 != pr.SHA256:
			return fmt.Sprintf("sha256 %s, the manifest records %s", root.sha256, pr.SHA256)
		case pr.Class != spec.ClassWorkspacePatch && root.size != pr.Bytes:
			return fmt.Sprintf("%d bytes, the manifest records %d", root.size, pr.Bytes)
		}
		return ""
	}
	if root.typ != "dir" {
		return fmt.Sprintf("a %s where the manifest records a directory", root.typ)
	}
	recorded := map[string]spec.EntryRecord{}
	for _, e := range pr.Entries {
		recorded[gate.EntryRel(pr.Slot, e.Path)] = e
	}
	entries := make([]gate.Entry, 0, len(items)-1)
	for _, it := range items[1:] {
		e, ok := recorded[it.rel]
		switch {
		case !ok:
			return fmt.Sprintf("%s (%s) is not in the manifest", strconv.Quote(it.rel), it.typ)
		case e.Type != it.typ:
			return fmt.Sprintf("%s is a %s, the manifest records a %s", strconv.Quote(it.rel), it.typ, e.Type)
		case it.typ != "dir" && (e.SHA256 != it.sha256 || e.Size != it.size):
			return fmt.Sprintf("%s has sha256 %s (%d bytes), the manifest records %s (%d bytes)", strconv.Quote(it.rel), it.sha256, it.size, e.SHA256, e.Size)
		case it.typ == "symlink" && e.Target != it.target:
			return fmt.Sprintf("%s points at %q, the manifest records %q", strconv.Quote(it.rel), it.target, e.Target)
		}
		entries = append(entries, gate.Entry{Path: e.Path, Type: it.typ, Mode: e.Mode, Size: it.size, SHA256: it.sha256})
	}
	if len(entries) != len(pr.Entries) {
		return fmt.Sprintf("%d entries, the manifest records %d", len(entries), len(pr.Entries))
	}
	if got := gate.TreeDigest(pr.Slot, entries); got != pr.TreeDigest {
		return fmt.Sprintf("tree digest %s, the manifest records %s", got, pr.TreeDigest)
	}
	return ""
}

// sameItems reports whether two readings of a product are the same
// objects: paths, types, permission bits, sizes, digests and targets.
func sameItems(a, b []item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.typ == "symlink" {
			x.perm, y.perm = 0, 0 // a symlink's mode means nothing
		}
		if x != y {
			return false
		}
	}
	return true
}
