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
// Overlay layout: a non-directory whose mode, owner, size, mtime (and rdev)
// equal the image's, whose mtime predates the task, and whose content (a
// symlink's target) and extended attributes compare equal to the image's
// is a copy-up, not a change (chmod back and forth, chown to the same
// owner, open for write without writing). Metadata alone is not enough: a
// workload can write new bytes and set size and mtime back, or add only a
// security.capability. The content and xattrs are read only for entries
// that pass every metadata test (sameAsImage), so fresh files cost
// nothing. A directory with the image's mode and owner is compared by
// xattrs alone: its entries are the walk's business.
// Bind layout: the image and the changes share one directory, so anything
// with ctime after the start is an add and deletions are invisible.
//
// bad is set when the content could not be compared (the entry is then a
// modify); the caller records it.
func (g *gater) changeOf(e *walk.Entry, structural bool) (ch change, bad *Violation) {
	if e.Err != nil {
		return chModify, nil // unknown: count it rather than lose it
	}
	if !g.overlay {
		if (e.Kind == walk.KindDir && structural) || e.Stat.Ctime.Before(g.fresh) {
			return chNone, nil
		}
		return chAdd, nil
	}
	img := e.Image
	switch {
	case e.Kind == walk.KindWhiteout:
		if img == nil {
			return chNone, nil
		}
		return chDelete, nil
	case img == nil:
		if e.Kind == walk.KindDir && structural {
			return chNone, nil
		}
		return chAdd, nil
	case img.Kind != e.Kind || (e.Kind == walk.KindDir && e.Opaque):
		return chReplace, nil
	case structural:
		return chNone, nil
	}
	s, i := e.Stat, img.Stat
	same := s.Perm() == i.Perm() && s.Uid == i.Uid && s.Gid == i.Gid
	if e.Kind == walk.KindDir {
		if !same {
			return chModify, nil
		}
		if ok, bad := g.sameXattrs(e, nil); !ok {
			return chModify, bad
		}
		return chNone, nil
	}
	if !same || s.Size != i.Size || s.Rdev != i.Rdev || !s.Mtime.Equal(i.Mtime) || !s.Mtime.Before(g.fresh) {
		return chModify, nil
	}
	if ok, bad := g.sameAsImage(e); !ok {
		return chModify, bad
	}
	return chNone, nil
}
