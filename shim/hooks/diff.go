package hooks

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/hostfacts"
)

// diffSource is where the gate reads what the container changed: the
// upperdir of the overlay the engine mounted at root.path (podman's
// containers/storage overlay driver), and its lowerdirs. Problem says why
// there is none.
type diffSource struct {
	Upper     string   `json:"upperdir,omitempty"`
	Lowers    []string `json:"lowerdirs,omitempty"`
	UserXattr bool     `json:"userxattr,omitempty"`
	Problem   string   `json:"problem,omitempty"`
}

// diffOf finds the overlay mounted at root in the host's mount table. The
// engine mounts it there before runc runs and unmounts it only after
// poststop. containers/storage names lowerdirs relative to its overlay
// directory (l/<short id>) when the absolute list would not fit a page;
// those are taken relative to the upperdir's layer's parent.
func diffOf(root string) diffSource {
	var found *diffSource
	for _, m := range hostfacts.MountTable() {
		if m.Mountpoint != root {
			continue
		}
		if m.FSType != "overlay" {
			found = &diffSource{Problem: fmt.Sprintf("root.path %s is a %s mount, not an overlay: the gate reads an overlay upperdir", root, m.FSType)}
			continue
		}
		opts := strings.Split(m.VFSOptions, ",")
		d, err := gate.ParseOverlayOptions(absLowers(opts))
		switch {
		case err != nil:
			found = &diffSource{Problem: err.Error()}
		case d.Upper == "":
			found = &diffSource{Problem: "the overlay at root.path has no upperdir (read-only)"}
		case slices.Contains(opts, "metacopy=on"):
			found = &diffSource{Problem: "the overlay at root.path is mounted with metacopy=on: an upper file may hold no data, so the upperdir does not say what the container wrote"}
		default:
			found = &diffSource{Upper: d.Upper, Lowers: d.Lowers, UserXattr: d.UserXattr}
		}
	}
	if found == nil {
		return diffSource{Problem: fmt.Sprintf("nothing is mounted at root.path %s: the gate reads the overlay upperdir of the engine's rootfs", root)}
	}
	return *found
}

// absLowers makes relative lowerdir entries absolute against the overlay
// driver's home (the parent of the upperdir's layer directory).
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
		parts := strings.Split(v, ":")
		for j, p := range parts {
			if p == "" || strings.Contains(p, "\\") {
				continue
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(home, p)
			}
			// containers/storage's l/<short id> names are symlinks to the
			// layer's diff; the walker opens layers without following one.
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			parts[j] = p
		}
		out[i] = "lowerdir=" + strings.Join(parts, ":")
	}
	return out
}
