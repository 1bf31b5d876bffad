package walk

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// Options configure a Tree.
type Options struct {
	// Overlay marks Root as an overlay upperdir: 0/0 character devices are
	// whiteouts and overlay xattrs are inspected on directories and files.
	Overlay bool
	// XattrNS is the overlay xattr namespace of the mount: "trusted"
	// (default) or "user" (mounted with userxattr).
	XattrNS string
	// Lowers are the overlay's lower directories, top layer first. They are
	// the image, consulted to tell additions from modifications.
	Lowers []string
	// MaxNames caps the directory entries read over the whole walk
	// (0: no cap). Exceeding it ends the walk with a *LimitError.
	MaxNames int64
}

// LimitError ends a walk that read more directory entries than allowed.
type LimitError struct {
	Path  string // directory being listed
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("walk: more than %d directory entries (at %q)", e.Limit, e.Path)
}

// Tree is an opened root (and its image layers) ready to be walked.
type Tree struct {
	opts   Options
	root   int
	lowers []layerDir
	names  int64
}

// Open opens root and the lower directories. The paths are runtime
// configuration, not container-controlled; everything below them is.
func Open(root string, opts Options) (t *Tree, retErr error) {
	if opts.XattrNS == "" {
		opts.XattrNS = "trusted"
	}
	if opts.XattrNS != "trusted" && opts.XattrNS != "user" {
		return nil, fmt.Errorf("open tree: xattr namespace %q: want trusted or user", opts.XattrNS)
	}
	if !opts.Overlay && len(opts.Lowers) > 0 {
		return nil, errors.New("open tree: lower directories given without overlay layout")
	}
	fd, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	tree := &Tree{opts: opts, root: fd}
	t = tree
	defer func() {
		if retErr != nil {
			tree.Close() // t is nil here: the error return set it
		}
	}()
	for i, l := range opts.Lowers {
		lfd, err := openRoot(l)
		if err != nil {
			return nil, fmt.Errorf("image layer %d: %w", i, err)
		}
		t.lowers = append(t.lowers, layerDir{fd: lfd, layer: i})
	}
	return t, nil
}

// Close releases the root and layer fds.
func (t *Tree) Close() error {
	for _, l := range t.lowers {
		unix.Close(l.fd)
	}
	t.lowers = nil
	if t.root >= 0 {
		unix.Close(t.root)
		t.root = -1
	}
	return nil
}

// Overlay reports whether the tree is an overlay upperdir.
func (t *Tree) Overlay() bool { return t.opts.Overlay }

// VisitFunc is called for every entry, parents before children and siblings
// in bytewise name order. It returns whether to descend into a directory.
// The Entry and its fds are valid only during the call.
type VisitFunc func(e *Entry) (descend bool, err error)

// Walk visits every entry below the root depth-first. It stops at the first
// error from visit or from ctx; per-entry problems (an entry that changed
// under the walker) are reported on Entry.Err instead.
func (t *Tree) Walk(ctx context.Context, visit VisitFunc) error {
	return t.walkDir(ctx, &dirState{fd: t.root, lowers: t.lowers}, visit)
}

// dirState is a directory being listed: its fd and the image's layers at the
// same path.
type dirState struct {
	fd     int
	path   string
	depth  int
	lowers []layerDir
}

func (t *Tree) walkDir(ctx context.Context, d *dirState, visit VisitFunc) error {
	budget := int64(-1)
	if t.opts.MaxNames > 0 {
		budget = t.opts.MaxNames - t.names
	}
	names, cut, err := fsafe.ReadNames(d.fd, budget)
	if err != nil {
		return fmt.Errorf("list %q: %w", d.path, err)
	}
	t.names += int64(len(names))
	if cut {
		return &LimitError{Path: d.path, Limit: t.opts.MaxNames}
	}
	sort.Strings(names)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("walk %q: %w", d.path, err)
		}
		e := t.entry(d, name)
		descend, err := visit(e)
		if err == nil && descend && e.Kind == KindDir && e.fd >= 0 {
			err = t.descend(ctx, e, d, visit)
		}
		e.close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *Tree) descend(ctx context.Context, e *Entry, d *dirState, visit VisitFunc) error {
	child := &dirState{fd: e.fd, path: e.Path, depth: e.Depth}
	if e.Image != nil && e.Image.Kind == KindDir && !e.Opaque {
		lowers, err := descendLower(d.lowers, e.Name, t.opts.XattrNS)
		if err != nil {
			return fmt.Errorf("walk %q: %w", e.Path, err)
		}
		child.lowers = lowers
		defer closeLayers(lowers)
	}
	return t.walkDir(ctx, child, visit)
}
