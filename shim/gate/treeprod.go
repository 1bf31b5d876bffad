package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/gensee/gensee/shim/walk"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// treeProduct is a directory class: blob_set (a flat directory of regular
// files) or directory_tree (nested, depth-capped, symlinks only with
// allow_symlinks and then recorded and staged as symlinks, never followed).
type treeProduct struct {
	*product
	staged bool
	stack  []stagedDir // staged directories along the current walk path
	// before: the slot's directory is as the baseline found it (no entry
	// added to or removed from it since the start); written: an entry
	// below the slot is the workload's. A slot that is before and not
	// written holds nothing the workload wrote.
	before, written bool
}

type stagedDir struct {
	rel string
	fd  int
}

func (t *treeProduct) begin(*gater) error { return nil }

func (t *treeProduct) root(g *gater, v *visit) (bool, error) {
	t.resolved, t.before = true, v.before
	e := v.e
	if !t.kindOK(e, v.path, true) {
		return false, nil
	}
	if g.overlay && e.Image != nil {
		delta, err := e.ImageHasEntries()
		switch {
		case err != nil:
			t.violate(RuleUnreadable, v.path, err.Error())
		case delta:
			t.violate(RulePartial, v.path, "the image has this directory with entries and the upper one is not opaque: it holds only a delta")
		}
	}
	t.freshOK(g, e, v.path)
	if t.failed {
		return false, nil
	}
	parent, err := g.env.stage.parentOf(t.slot)
	if err != nil {
		return false, err
	}
	defer unix.Close(parent)
	fd, err := mkdir(parent, path.Base(t.slot))
	if err != nil {
		return false, err
	}
	t.staged = true
	t.stack = []stagedDir{{rel: "", fd: fd}}
	return true, nil
}

func (t *treeProduct) child(g *gater, v *visit) (bool, error) {
	e := v.e
	t.written = t.written || !v.before
	if why := badName(g, e.Name); why != "" {
		t.violate(RuleBadName, v.path, why)
		return false, nil
	}
	if t.entries++; t.entries > t.maxEntries {
		t.stop(RuleOverMaxEntries, v.path, fmt.Sprintf("more than max_entries %d", t.maxEntries))
		return false, nil
	}
	if depth := e.Depth - t.depth; depth > t.maxDepth {
		t.stop(RuleOverMaxDepth, v.path, fmt.Sprintf("depth %d exceeds max_depth %d; not descended", depth, t.maxDepth))
		return false, nil
	}
	t.freshOK(g, e, v.path)
	entry := Entry{Path: v.path, Type: e.Kind.String(), Mode: modeString(e.Stat.Perm())}
	switch e.Kind {
	case walk.KindDir:
		if t.decl.Class == spec.ClassBlobSet {
			t.violate(RuleSubdirectory, v.path, "blob_set holds regular files only")
			return false, nil
		}
		t.res.Entries = append(t.res.Entries, entry)
		return true, t.stageDir(v.rel)
	case walk.KindFile:
		return false, t.file(g, v, entry)
	case walk.KindSymlink:
		return false, t.symlink(v, entry)
	case walk.KindWhiteout:
		t.violate(RuleWhiteout, v.path, "a deletion inside a product directory")
	default:
		t.violate(RuleSpecialFile, v.path, fmt.Sprintf("a %s; it is never opened", e.Kind))
	}
	return false, nil
}

func (t *treeProduct) file(g *gater, v *visit, entry Entry) error {
	if !t.fileOK(v.e, v.path) || t.failed {
		return nil
	}
	dirfd, err := t.parent(v.rel)
	if err != nil {
		return err
	}
	out, err := create(dirfd, path.Base(v.rel), stagedPerm(v.e.Stat.Perm()))
	if err != nil {
		return err
	}
	sum, ok, err := t.copyFile(g, v.e, v.path, out)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close staged %s: %w", v.path, cerr)
	}
	if err != nil || !ok {
		return err
	}
	entry.Size, entry.SHA256 = v.e.Stat.Size, sum
	t.res.Entries = append(t.res.Entries, entry)
	return nil
}

func (t *treeProduct) symlink(v *visit, entry Entry) error {
	if t.decl.Class == spec.ClassBlobSet || !t.decl.AllowSymlinks {
		t.violate(RuleSymlink, v.path, "symlinks are not allowed in this product (allow_symlinks is false); never followed")
		return nil
	}
	target, err := v.e.Readlink()
	if err != nil {
		t.violate(RuleUnreadable, v.path, err.Error())
		return nil
	}
	if why := badTarget(target); why != "" {
		t.violate(RuleBadName, v.path, why)
		return nil
	}
	sum := sha256.Sum256([]byte(target))
	entry.Size, entry.SHA256, entry.Target = int64(len(target)), hex.EncodeToString(sum[:]), target
	t.res.Entries = append(t.res.Entries, entry)
	if t.failed {
		return nil
	}
	dirfd, err := t.parent(v.rel)
	if err != nil {
		return err
	}
	if err := unix.Symlinkat(target, dirfd, path.Base(v.rel)); err != nil {
		return fmt.Errorf("stage symlink %s: %w", v.path, err)
	}
	return nil
}

// stageDir mirrors a directory into staging and makes it the innermost
// staged directory.
func (t *treeProduct) stageDir(rel string) error {
	if t.failed {
		return nil
	}
	parent, err := t.parent(rel)
	if err != nil {
		return err
	}
	fd, err := mkdir(parent, path.Base(rel))
	if err != nil {
		return err
	}
	t.stack = append(t.stack, stagedDir{rel: rel, fd: fd})
	return nil
}

// parent returns the staged directory for rel's parent. The walk is
// depth-first, so it is on the stack once the directories the walk has left
// are popped.
func (t *treeProduct) parent(rel string) (int, error) {
	want := path.Dir(rel)
	if want == "." {
		want = ""
	}
	for len(t.stack) > 0 && t.stack[len(t.stack)-1].rel != want {
		unix.Close(t.stack[len(t.stack)-1].fd)
		t.stack = t.stack[:len(t.stack)-1]
	}
	if len(t.stack) == 0 {
		return -1, fmt.Errorf("stage %s/%s: parent directory was not staged", t.slot, rel)
	}
	return t.stack[len(t.stack)-1].fd, nil
}

func (t *treeProduct) closeStack() {
	for _, d := range t.stack {
		unix.Close(d.fd)
	}
	t.stack = nil
}

func (t *treeProduct) finish(g *gater) error {
	t.closeStack()
	if t.valid && !t.resolved {
		t.missing(g)
	}
	if t.before && !t.written && !t.failed {
		t.violate(RulePartial, t.slot, "the directory was in the upper directory before the workload started and nothing below it is the workload's: it did not write this product; write the product during the task")
	}
	if !t.failed {
		t.res.TreeDigest = TreeDigest(t.slot, t.res.Entries)
		t.res.Bytes = t.bytes
	}
	return t.settle(g, t.staged)
}

func (t *treeProduct) abort(g *gater) {
	t.closeStack()
	if t.staged {
		g.env.stage.remove(t.slot)
	}
}

// badName extends walk.CheckName with the overlay rule: a ".wh." name in an
// upper layer would read as a whiteout to anyone turning it into a layer.
func badName(g *gater, name string) string {
	if why := walk.CheckName(name); why != "" {
		return why
	}
	if g.overlay && strings.HasPrefix(name, ".wh.") {
		return "name starts with the overlay whiteout prefix .wh."
	}
	return ""
}

// badTarget rejects symlink targets that cannot be recorded faithfully.
func badTarget(target string) string {
	if !utf8.ValidString(target) || strings.ContainsAny(target, "\x00\n\r") {
		return "symlink target is not valid UTF-8 or contains a newline"
	}
	return ""
}
