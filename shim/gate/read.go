package gate

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/gensee/gensee/shim/walk"
)

// copyFile copies one of the container's regular files into dst while
// hashing it, then checks that what was read is what was stat'ed: not more
// than the remaining budget, exactly st_size bytes, and the same size and
// mtime on a second fstat. Returns ok=false after recording a violation;
// err is reserved for the runtime's own failures.
func (p *product) copyFile(g *gater, e *walk.Entry, path string, dst io.Writer) (sum string, ok bool, err error) {
	r, err := e.Reader()
	if err != nil {
		p.violate(entryRule(err), path, err.Error())
		return "", false, nil
	}
	n, digest, err := copyHashed(g.env.ctx, dst, r, e.Stat.Size, p.maxBytes-p.bytes, g.env.buf)
	var se *sourceError
	switch {
	case errors.As(err, &se):
		p.violate(RuleUnreadable, path, se.Error())
		return "", false, nil
	case err != nil:
		return "", false, err
	case n > p.maxBytes-p.bytes:
		p.stop(RuleOverMaxBytes, path, fmt.Sprintf("file grew past max_bytes %d while it was read", p.maxBytes))
		return "", false, nil
	case n != e.Stat.Size:
		p.violate(RuleChanged, path, fmt.Sprintf("read %d bytes, fstat said %d", n, e.Stat.Size))
		return "", false, nil
	}
	st, err := e.Restat()
	if err != nil {
		p.violate(RuleUnreadable, path, err.Error())
		return "", false, nil
	}
	if st.Size != e.Stat.Size || !st.Mtime.Equal(e.Stat.Mtime) {
		p.violate(RuleChanged, path, "size or mtime changed while the file was read")
		return "", false, nil
	}
	p.bytes += n
	return hex.EncodeToString(digest), true, nil
}

// entryRule names the violation for an entry the walker could not examine.
func entryRule(err error) string {
	if errors.Is(err, walk.ErrChanged) {
		return RuleChanged
	}
	return RuleUnreadable
}

// missing decides between "missing" and "partial" for a slot the walk
// never reached: if the merged view shows the image's entry there, the task
// did not write it.
func (p *product) missing(g *gater) {
	img, err := g.env.tree.ImageLookup(p.upath)
	switch {
	case err != nil:
		p.violate(RuleUnreadable, p.slot, err.Error())
	case img != nil:
		p.violate(RulePartial, p.slot, fmt.Sprintf("the image has a %s at the slot and the task did not write it", img.Kind))
	default:
		p.violate(RuleMissing, p.slot, "nothing at the slot")
	}
}

// settle turns the run's findings into the verdict; a failed product's
// staged output is removed.
func (p *product) settle(g *gater, staged bool) error {
	if !p.failed {
		p.res.Verdict = Pass
		p.res.Staged = g.env.stage.path(p.slot)
		return nil
	}
	p.res.Verdict = Fail
	p.res.Staged = ""
	p.res.TreeDigest = ""
	if staged {
		return g.env.stage.remove(p.slot)
	}
	return nil
}
