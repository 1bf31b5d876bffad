package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gensee/gensee/shim/walk"
)

// compareChunk is how much of each file is read per comparison step.
const compareChunk = 256 << 10

// sameAsImage is asked only about an upper non-directory whose metadata
// already equals the image's (see changeOf): does it also hold the image's
// content? A workload can write new bytes and then set size and mtime back,
// so metadata alone cannot call it a copy-up. It answers true only when the
// content was compared and found equal; every failure to compare (image
// file unreadable, entry changed while read, compare cap reached) answers
// false with the violation to record, so the entry counts as modified and
// the caller reports why (an anomaly, and a violation of its products).
//
// The extended attributes must match too (sameXattrs): a fifo, socket or
// device has no content beyond the compared metadata (rdev included), so
// only its xattrs are compared.
func (g *gater) sameAsImage(e *walk.Entry) (bool, *Violation) {
	switch e.Kind {
	case walk.KindFile:
		return g.sameBytes(e) // xattrs through the image file it opens
	case walk.KindSymlink:
		if ok, bad := g.sameTarget(e); !ok {
			return false, bad
		}
	}
	return g.sameXattrs(e, nil)
}

func failed(rule, detail string) (bool, *Violation) {
	return false, &Violation{Rule: rule, Detail: detail}
}

func (g *gater) sameTarget(e *walk.Entry) (bool, *Violation) {
	up, err := e.Readlink()
	if err != nil {
		return failed(RuleUnreadable, "compare with the image: "+err.Error())
	}
	img, err := e.ImageReadlink()
	if err != nil {
		return failed(RuleUnreadable, "compare with the image: "+err.Error())
	}
	return up == img, nil
}

// sameBytes compares the extended attributes of the upper file and the
// image's file, then streams both side by side in compareChunk steps,
// stopping at the first difference. Equal bytes count only if neither
// file's size or mtime moved during the read.
func (g *gater) sameBytes(e *walk.Entry) (bool, *Violation) {
	size := e.Stat.Size
	if size > g.compareLeft {
		if !g.compareCut {
			g.compareCut = true
			return failed(RuleOverMaxBytes, fmt.Sprintf("comparing copied-up files with the image would read more than %d bytes of each; this and every later copy-up whose metadata matches the image's are counted as modified without being compared; do not copy up large image files unchanged in the task (chown -R to the same owner, opening them for write)", g.compareBytes))
		}
		return false, nil
	}
	g.compareLeft -= size
	img, err := e.OpenImage()
	if err != nil {
		return failed(entryRule(err), "compare with the image: "+err.Error())
	}
	defer img.Close()
	if img.Stat.Size != size || !img.Stat.Mtime.Equal(e.Image.Stat.Mtime) {
		return failed(RuleChanged, "the image's file changed between lookup and open")
	}
	if ok, bad := g.sameXattrs(e, img); !ok {
		return false, bad
	}
	up, err := e.Reader()
	if err != nil {
		return failed(entryRule(err), "compare with the image: "+err.Error())
	}
	a, b := g.env.compareBufs()
	same, err := equalStreams(g.env.ctx, up, img.Reader(), size, a, b)
	var se *sourceError
	switch {
	case errors.As(err, &se):
		return failed(RuleUnreadable, "compare with the image: "+se.Error())
	case errors.Is(err, errShort):
		return failed(RuleChanged, "compare with the image: "+err.Error())
	case err != nil:
		return false, nil // cancelled: the walk ends with the context's error
	case !same:
		return false, nil
	}
	return unmoved(e, img)
}

// unmoved re-fstats both files after an equal compare.
func unmoved(e *walk.Entry, img *walk.ImageFile) (bool, *Violation) {
	st, err := e.Restat()
	if err == nil && (st.Size != e.Stat.Size || !st.Mtime.Equal(e.Stat.Mtime)) {
		err = errors.New("size or mtime changed while the file was compared with the image")
	}
	if err == nil {
		var ist walk.Stat
		if ist, err = img.Restat(); err == nil && (ist.Size != img.Stat.Size || !ist.Mtime.Equal(img.Stat.Mtime)) {
			err = errors.New("the image's file changed while it was compared")
		}
	}
	if err != nil {
		return failed(RuleChanged, err.Error())
	}
	return true, nil
}

// errShort reports a file that ended before its st_size.
var errShort = errors.New("file shorter than fstat said")

// equalStreams reports whether x and y both hold the same size bytes,
// reading at most size bytes of each, len(a) at a time (a and b have equal
// length), and stopping at the first differing chunk. ctx is checked
// between chunks. Read failures are *sourceError; a stream that ends early
// wraps errShort.
func equalStreams(ctx context.Context, x, y io.Reader, size int64, a, b []byte) (bool, error) {
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("compare: %w", err)
		}
		n := int(min(int64(len(a)), size-off))
		if err := readChunk(x, a[:n], off); err != nil {
			return false, err
		}
		if err := readChunk(y, b[:n], off); err != nil {
			return false, err
		}
		if !bytes.Equal(a[:n], b[:n]) {
			return false, nil
		}
		off += int64(n)
	}
	return true, nil
}

func readChunk(r io.Reader, buf []byte, off int64) error {
	_, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("%w (ended before byte %d)", errShort, off+int64(len(buf)))
	case err != nil:
		return &sourceError{err}
	}
	return nil
}

// compareBufs returns the two compare buffers, allocated on first use: most
// runs never compare anything.
func (env *runEnv) compareBufs() ([]byte, []byte) {
	if env.cmp == nil {
		env.cmp = make([]byte, 2*compareChunk)
	}
	return env.cmp[:compareChunk:compareChunk], env.cmp[compareChunk:]
}
