package gate

import (
	"fmt"
	"path"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// fileProduct is a one-regular-file class: blob, structured_result or
// environment_snapshot. The latter two are validated on the staged copy
// (runtime-owned) after the single read of the container's file.
type fileProduct struct {
	*product
	staged bool
}

func (f *fileProduct) begin(*gater) error                 { return nil }
func (f *fileProduct) child(*gater, *visit) (bool, error) { return false, nil }

func (f *fileProduct) root(g *gater, v *visit) (bool, error) {
	f.resolved = true
	e := v.e
	if !f.kindOK(e, v.path, false) {
		return false, nil
	}
	f.fileOK(e, v.path)
	if g.overlay && e.Image != nil && e.Stat.Mtime.Before(g.fresh) {
		f.violate(RulePartial, v.path, partialDetail(v.ch))
	}
	f.freshOK(g, e, v.path)
	if f.failed {
		return false, nil
	}
	return false, f.stage(g, v)
}

// partialDetail explains a file slot refused by the fresh-slot rule. The
// rule stays on mtime even when the content differs from the image's (ch is
// then modify): different bytes prove only that someone wrote the file
// since the snapshot was prepared (a hook between create and start, an
// earlier task on the same snapshot), not that this task wrote it, and a
// task that sets its product's mtime back has said it did not.
func partialDetail(ch change) string {
	if ch == chNone {
		return "the image has this file and its upper copy holds the image's bytes, metadata and extended attributes (copy-up only); write the product during the task"
	}
	return "the image has this file and its upper copy's mtime predates the task start: a copy-up (chmod, chown, open for write) or a write whose mtime was set back (touch -d, cp -p, tar); write the product during the task, keeping the current time as its mtime"
}

func (f *fileProduct) stage(g *gater, v *visit) error {
	dirfd, err := g.env.stage.parentOf(f.slot)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	name := path.Base(f.slot)
	out, err := create(dirfd, name, stagedPerm(v.e.Stat.Perm()))
	if err != nil {
		return err
	}
	f.staged = true
	sum, ok, err := f.copyFile(g, v.e, v.path, out)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close staged %s: %w", f.slot, cerr)
	}
	if err != nil || !ok {
		return err
	}
	f.res.Entries = []Entry{{Path: v.path, Type: "file", Mode: modeString(v.e.Stat.Perm()), Size: v.e.Stat.Size, SHA256: sum}}
	f.res.SHA256, f.res.Bytes = sum, v.e.Stat.Size
	return f.checkContent(dirfd, name)
}

// checkContent validates structured_result and environment_snapshot bytes,
// reading the staged copy (never the container's file a second time).
func (f *fileProduct) checkContent(dirfd int, name string) error {
	if f.decl.Class == spec.ClassBlob {
		return nil
	}
	staged, _, err := fsafe.OpenFileAt(dirfd, name)
	if err != nil {
		return fmt.Errorf("reopen staged %s: %w", f.slot, err)
	}
	defer staged.Close()
	var bad *Violation
	if f.decl.Class == spec.ClassStructuredResult {
		bad = CheckJSON(staged)
	} else {
		_, bad = CheckEnv(staged, f.maxEntries)
	}
	if bad != nil {
		f.violate(bad.Rule, f.slot, bad.Detail)
	}
	return nil
}

func (f *fileProduct) finish(g *gater) error {
	if f.valid && !f.resolved {
		f.missing(g)
	}
	return f.settle(g, f.staged)
}

func (f *fileProduct) abort(g *gater) {
	if f.staged {
		g.env.stage.remove(f.slot)
	}
}
