package walk

import (
	"fmt"
	"strings"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// Image describes what the image (the overlay's lower layers) has at a path.
type Image struct {
	Kind  Kind
	Stat  Stat
	Layer int // index into Options.Lowers; 0 is the top layer
}

// layerDir is one lower layer's directory at the path being walked.
type layerDir struct {
	fd    int
	layer int
	owned bool // closed by closeLayers; the root fds belong to the Tree
}

func closeLayers(ls []layerDir) {
	for _, l := range ls {
		if l.owned {
			unix.Close(l.fd)
		}
	}
}

// lookupLower finds name in a stack of lower directories, top layer first.
// A whiteout in a higher layer hides the name in the layers below it.
func lookupLower(stack []layerDir, name string) (*Image, error) {
	for _, l := range stack {
		var st unix.Stat_t
		err := fstatat(l.fd, name, &st)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stat %q in image layer %d: %w", name, l.layer, err)
		}
		k := kindOf(&st, true)
		if k == KindWhiteout {
			return nil, nil
		}
		return &Image{Kind: k, Stat: statOf(&st), Layer: l.layer}, nil
	}
	return nil, nil
}

// descendLower returns the lower directories that make up the image's view
// of name: layers are stacked top-down until one has a non-directory or a
// whiteout there, or marks its directory opaque.
func descendLower(stack []layerDir, name, ns string) ([]layerDir, error) {
	var out []layerDir
	for _, l := range stack {
		var st unix.Stat_t
		err := fstatat(l.fd, name, &st)
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			closeLayers(out)
			return nil, fmt.Errorf("stat %q in image layer %d: %w", name, l.layer, err)
		}
		if kindOf(&st, true) != KindDir {
			break
		}
		fd, _, err := openChecked(l.fd, name, unix.O_RDONLY|unix.O_DIRECTORY, &st)
		if err != nil {
			closeLayers(out)
			return nil, fmt.Errorf("image layer %d: %w", l.layer, err)
		}
		out = append(out, layerDir{fd: fd, layer: l.layer, owned: true})
		opaque, err := isOpaque(fd, ns)
		if err != nil {
			closeLayers(out)
			return nil, fmt.Errorf("image layer %d: %w", l.layer, err)
		}
		if opaque {
			break
		}
	}
	return out, nil
}

// hasVisible reports whether the merged view of a lower directory stack has
// at least one entry that is not whited out.
func hasVisible(stack []layerDir) (bool, error) {
	seen := map[string]bool{}
	for _, l := range stack {
		names, _, err := fsafe.ReadNames(l.fd, -1)
		if err != nil {
			return false, fmt.Errorf("image layer %d: %w", l.layer, err)
		}
		for _, n := range names {
			if seen[n] {
				continue
			}
			seen[n] = true
			var st unix.Stat_t
			if err := fstatat(l.fd, n, &st); err != nil {
				return false, fmt.Errorf("stat %q in image layer %d: %w", n, l.layer, err)
			}
			if kindOf(&st, true) != KindWhiteout {
				return true, nil
			}
		}
	}
	return false, nil
}

// ImageLookup reports what the image shows at rel ('/'-separated, relative
// to the root) unless the upper layer hides it: a whiteout or a
// non-directory at an ancestor, or an opaque ancestor directory. nil means
// the merged view has nothing from the image there. Bind layout: always nil.
func (t *Tree) ImageLookup(rel string) (*Image, error) {
	if len(t.lowers) == 0 || rel == "" {
		return nil, nil
	}
	comps := strings.Split(rel, "/")
	upper, upperOK := t.root, true
	var upperOwned []int
	defer func() {
		for _, fd := range upperOwned {
			unix.Close(fd)
		}
	}()
	stack := t.lowers
	defer func() { closeLayers(stack) }()
	for i, c := range comps {
		last := i == len(comps)-1
		if upperOK {
			var st unix.Stat_t
			err := fstatat(upper, c, &st)
			switch {
			case err == unix.ENOENT:
				upperOK = false
			case err != nil:
				return nil, fmt.Errorf("image lookup %q: %w", rel, err)
			case kindOf(&st, true) == KindWhiteout:
				return nil, nil
			case !last && kindOf(&st, true) != KindDir:
				return nil, nil
			case !last:
				fd, _, err := openChecked(upper, c, unix.O_RDONLY|unix.O_DIRECTORY, &st)
				if err != nil {
					return nil, fmt.Errorf("image lookup %q: %w", rel, err)
				}
				upperOwned = append(upperOwned, fd)
				upper = fd
				if opaque, err := isOpaque(fd, t.opts.XattrNS); err != nil || opaque {
					return nil, err
				}
			}
		}
		if last {
			return lookupLower(stack, c)
		}
		next, err := descendLower(stack, c, t.opts.XattrNS)
		if err != nil {
			return nil, fmt.Errorf("image lookup %q: %w", rel, err)
		}
		closeLayers(stack)
		stack = next
		if len(stack) == 0 {
			return nil, nil
		}
	}
	return nil, nil
}
