package gate

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/gensee/gensee/shim/walk"
)

// sameXattrs is asked about an upper entry whose metadata (and, for files
// and symlinks, content) already equals the image's: does it also carry
// the image's extended attributes? A copy-up that only adds or changes one
// (security.capability on an image binary, an ACL, a user.* attribute) is
// a change. img is the image's file when the caller holds it open; nil
// reads the image entry through the walker. Like sameAsImage, every
// failure to compare answers false with the violation to record, except a
// kernel that cannot read a symlink's or special file's xattrs without
// following it (walk.ErrNoXattrAt): those are skipped, see doc.go.
func (g *gater) sameXattrs(e *walk.Entry, img *walk.ImageFile) (bool, *Violation) {
	up, err := e.Xattrs()
	if err != nil {
		return xattrFailed(err)
	}
	var im []walk.Xattr
	if img != nil {
		im, err = img.Xattrs()
	} else {
		im, err = e.ImageXattrs()
	}
	if err != nil {
		return xattrFailed(err)
	}
	return equalXattrs(up, im), nil
}

func xattrFailed(err error) (bool, *Violation) {
	switch {
	case errors.Is(err, walk.ErrNoXattrAt):
		return true, nil
	case errors.Is(err, walk.ErrXattrCap):
		return failed(RuleOverMaxBytes, fmt.Sprintf("compare extended attributes with the image: %v; the gate reads at most %d bytes of one value and %d bytes of names and values per file; do not put large extended attributes on image files in the task", err, walk.MaxXattrValue, walk.MaxXattrBytes))
	}
	return failed(entryRule(err), "compare extended attributes with the image: "+err.Error())
}

// equalXattrs reports whether a and b hold the same names with the same
// values, in any order. listxattr never repeats a name; a list that does
// is unequal to everything (fail closed).
func equalXattrs(a, b []walk.Xattr) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string][]byte, len(a))
	for _, x := range a {
		m[x.Name] = x.Value
	}
	seen := make(map[string]bool, len(b))
	for _, y := range b {
		v, ok := m[y.Name]
		if !ok || seen[y.Name] || !bytes.Equal(v, y.Value) {
			return false
		}
		seen[y.Name] = true
	}
	return len(m) == len(a)
}
