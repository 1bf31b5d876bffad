package hooks

import (
	"fmt"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/hostfacts"
)

// diffSource is where the gate reads what the container changed: the
// upperdir of the overlay the engine mounted at root.path (podman's
// containers/storage overlay driver), and its lowerdirs. Problem says why
// there is none.
type diffSource = gate.DiffSource

// diffOf finds the overlay mounted at root in the host's mount table. The
// engine mounts it there before runc runs and unmounts it only after
// poststop. The overlay is read as every door reads one (gate.ReadOverlay,
// which places containers/storage's relative lowerdirs).
func diffOf(root string) diffSource {
	m := gate.MountAt(root, hostfacts.MountTable())
	switch {
	case m == nil:
		return diffSource{Problem: fmt.Sprintf("nothing is mounted at root.path %s: the gate reads the overlay upperdir of the engine's rootfs", root)}
	case m.FSType != "overlay":
		return diffSource{Problem: fmt.Sprintf("root.path %s is a %s mount, not an overlay: the gate reads an overlay upperdir", root, m.FSType)}
	case !gate.OverlayRoot(m):
		return diffSource{Problem: fmt.Sprintf("root.path %s binds %s inside an overlay, whose upperdir holds more than this tree", root, m.Root)}
	}
	d, err := gate.ReadOverlay(m)
	if err != nil {
		return diffSource{Problem: fmt.Sprintf("the overlay at root.path %s: %v", root, err)}
	}
	return diffSource{Upper: d.Upper, Lowers: d.Lowers, UserXattr: d.UserXattr}
}
