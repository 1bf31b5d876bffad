package gate

import "github.com/gensee/gensee/shim/walk"

// change is what an upper entry means relative to the image.
type change uint8

const (
	chNone    change = iota // copy-up only, or a directory that merely holds changes
	chAdd                   // not in the image
	chModify                // in the image, content or metadata changed
	chDelete                // whiteout of something the image had
	chReplace               // image entry removed and a new one put in its place (opaque dir, type change)
)

var changeNames = [...]string{"none", "add", "modify", "delete", "replace"}

func (c change) String() string { return changeNames[c] }

// changeOf classifies one entry. structural directories (ancestors of the
// workspace, slots and mounts) are never changes unless they replaced an
// image directory.
//
// Overlay layout: a non-directory whose mode, owner, size and mtime equal the
// image's and whose mtime predates the task is a copy-up, not a change
// (chmod back and forth, open for write without writing). Bind layout: the
// image and the changes share one directory, so anything with ctime after
// the start is an add and deletions are invisible.
func (g *gater) changeOf(e *walk.Entry, structural bool) change {
	if e.Err != nil {
		return chModify // unknown: count it rather than lose it
	}
	if !g.overlay {
		if (e.Kind == walk.KindDir && structural) || e.Stat.Ctime.Before(g.fresh) {
			return chNone
		}
		return chAdd
	}
	img := e.Image
	switch {
	case e.Kind == walk.KindWhiteout:
		if img == nil {
			return chNone
		}
		return chDelete
	case img == nil:
		if e.Kind == walk.KindDir && structural {
			return chNone
		}
		return chAdd
	case img.Kind != e.Kind || (e.Kind == walk.KindDir && e.Opaque):
		return chReplace
	case structural:
		return chNone
	}
	s, i := e.Stat, img.Stat
	same := s.Perm() == i.Perm() && s.Uid == i.Uid && s.Gid == i.Gid
	if e.Kind == walk.KindDir {
		if same {
			return chNone
		}
		return chModify
	}
	if same && s.Size == i.Size && s.Mtime.Equal(i.Mtime) && s.Mtime.Before(g.fresh) {
		return chNone
	}
	return chModify
}
