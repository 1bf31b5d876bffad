package gate

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// DiffSource is where the gate reads what a container changed, as every
// front door records it: the upperdir of an overlay over its image layers
// (lowerdirs, top first), or a directory gated as a single-layer snapshot
// (Root). BindOf names the bind source whose overlay was read from the
// mount table. Problem says why there is neither; the gate then claims no
// diff.
type DiffSource struct {
	Upper     string   `json:"upperdir,omitempty"`
	Lowers    []string `json:"lowerdirs,omitempty"`
	UserXattr bool     `json:"userxattr,omitempty"`
	Root      string   `json:"root,omitempty"`
	BindOf    string   `json:"bind_of,omitempty"`
	Problem   string   `json:"problem,omitempty"`
}

// MountAt is the topmost mount at dir in table (mountinfo order: a later
// entry is mounted on an earlier one), or nil when nothing is mounted at
// dir itself.
func MountAt(dir string, table []*mountinfo.Info) *mountinfo.Info {
	var at *mountinfo.Info
	for _, m := range table {
		if m.Mountpoint == dir {
			at = m
		}
	}
	return at
}

// OverlayRoot reports whether m is the root of an overlay: an overlay
// mount, not a bind of a directory inside one (whose upperdir holds more
// than that tree).
func OverlayRoot(m *mountinfo.Info) bool {
	return m != nil && m.FSType == "overlay" && m.Root == "/"
}

// ReadOverlay reads the directories of an overlay mount from its mountinfo
// super options (the kernel's escapes undone) and refuses what the gate
// cannot read as the container's diff: no upperdir (read-only), no
// lowerdir, metacopy=on (an upper file may hold no data), data-only
// layers, relative paths it cannot place. A relative lowerdir is taken
// against the overlay driver's home, the parent of the upperdir's layer
// directory (containers/storage names them l/<short id> when the absolute
// list would not fit a page), and every lowerdir is replaced by the path
// its symlinks resolve to (those l/ names are symlinks to the layer's
// diff; the walker opens layers without following one).
func ReadOverlay(m *mountinfo.Info) (OverlayDirs, error) {
	var opts []string
	for _, raw := range strings.Split(m.VFSOptions, ",") {
		o, err := unescapeOctal(raw)
		if err != nil {
			return OverlayDirs{}, errors.New("overlay super options: " + err.Error())
		}
		opts = append(opts, o)
	}
	d, err := ParseOverlayOptions(absLowers(opts))
	switch {
	case err != nil:
		return d, err
	case d.Upper == "":
		return d, errors.New("a read-only overlay (no upperdir)")
	case len(d.Lowers) == 0:
		return d, errors.New("an overlay without lowerdirs")
	case slices.Contains(opts, "metacopy=on"):
		return d, errors.New("an overlay mounted with metacopy=on: an upper file may hold no data, so the upperdir does not say what the container wrote")
	}
	return d, nil
}

// absLowers makes relative lowerdir entries absolute against the overlay
// driver's home and resolves their symlinks (ReadOverlay).
func absLowers(opts []string) []string {
	upper := ""
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, "upperdir="); ok {
			upper = v
		}
	}
	if !filepath.IsAbs(upper) {
		return opts // ParseOverlayOptions refuses it
	}
	home := filepath.Dir(filepath.Dir(upper))
	out := make([]string, len(opts))
	for i, o := range opts {
		out[i] = o
		v, ok := strings.CutPrefix(o, "lowerdir=")
		if !ok {
			continue
		}
		parts := splitLowers(v)
		for j, p := range parts {
			if p == "" {
				continue // a data-only layer ("::"): ParseOverlayOptions refuses it
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(home, p)
			}
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			parts[j] = p
		}
		out[i] = "lowerdir=" + joinLowers(parts)
	}
	return out
}

// joinLowers is splitLowers's inverse: the entries joined by colons, a
// colon or backslash in one escaped.
func joinLowers(parts []string) string {
	esc := strings.NewReplacer(`\`, `\\`, ":", `\:`)
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = esc.Replace(p)
	}
	return strings.Join(out, ":")
}
