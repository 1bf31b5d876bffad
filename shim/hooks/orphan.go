package hooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// CleanOrphans ends what operations whose monitor died left, each in the
// order the monitor's own exit path keeps (removeOrphan): the container's
// cgroup drained, then the table removed, then the manifest written, the
// operation marked cleaned and the marker removed. It returns the
// operation ids it cleaned.
func CleanOrphans(ctx context.Context, stateDir string) ([]string, error) {
	return record.CleanOrphans(record.Store{Dir: stateDir}, markersDir, func(m marker) error {
		o, err := removeOrphan(ctx, stateDir, m)
		if err != nil {
			return err
		}
		log.G(ctx).WithField("operation_id", m.OperationID).WithField("container_id", m.ContainerID).
			WithField("drained", o.Drained).WithField("manifest", o.manifest).
			Warn("an OCI hook operation's monitor process had died: its container's cgroup was drained and its table removed")
		return nil
	})
}

// orphanEnd is what the cleanup of one orphan did.
type orphanEnd struct {
	engine.Exit
	drainNote string // what was drained, or why nothing was
	manifest  bool   // the cleanup wrote the manifest
}

// removeOrphan ends one operation whose monitor died. The container may
// still run (the monitor died, not the container): removing the table
// first would leave it running unbound with no manifest, so its cgroup is
// drained first, and the table stays (the marker too, for the next hook)
// when the drain fails. The manifest is the cleanup's only when the
// monitor wrote none before it died (one whose table removal failed
// leaves its marker with a manifest written).
//
// The cgroup is drained only while it is the one the marker names (same
// path and cgroup id): a container restarted under the same id has a new
// cgroup at the same path, and is never the orphan's.
func removeOrphan(ctx context.Context, stateDir string, m marker) (orphanEnd, error) {
	st := record.Store{Dir: stateDir}
	var o orphanEnd
	finished := hasManifest(st, m.OperationID)
	if !finished {
		o.Drained, o.drainNote, o.DrainErr = drainOrphan(ctx, m)
		if o.DrainErr != nil {
			return o, fmt.Errorf("drain the container of operation %s before removing its table: %w", m.OperationID, o.DrainErr)
		}
	}
	removed, err := removeOrphanTable(ctx, m)
	if err != nil {
		return o, err
	}
	o.Removed = removed
	if !finished {
		if err := writeOrphanManifest(st, m, &o); err != nil {
			log.G(ctx).WithField("operation_id", m.OperationID).WithError(err).Error("write the manifest of an operation whose monitor died")
		}
	}
	_ = st.MarkCleaned(m.OperationID, "by a later OCI hook: the monitor process had died") // losing it only keeps the record longer
	removeMarker(stateDir, m.OperationID)
	return o, nil
}

func hasManifest(st record.Store, opID string) bool {
	dir, err := st.OperationDir(opID)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, record.ManifestFile))
	return err == nil
}

// drainOrphan kills whatever still runs in the marker's cgroup (cgroup.kill
// through drain.All, with no binding sensor: it died with the monitor). It
// returns how many processes it killed and, in words, what it found.
func drainOrphan(ctx context.Context, m marker) (drained int, note string, err error) {
	if m.Cgroup == "" {
		return 0, "the marker names no cgroup (written by an older gensee-oci-hook), so nothing was drained", nil
	}
	id, err := cgroup.ID(m.Cgroup)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Sprintf("its cgroup %s was gone: the container had exited", m.Cgroup), nil
	case err != nil:
		return 0, "", fmt.Errorf("cgroup id of %s: %w", m.Cgroup, err)
	case id != m.CgroupID:
		return 0, fmt.Sprintf("its cgroup %s is another one now (id %d, not %d): the container had exited", m.Cgroup, id, m.CgroupID), nil
	}
	r := drain.All(ctx, m.Cgroup, drain.StepsFor(nil))
	if r.Err != nil && !errors.Is(r.Err, fs.ErrNotExist) {
		return r.Drained, "", r.Err
	}
	return r.Drained, fmt.Sprintf("its cgroup %s (id %d) was drained by the cleanup: %d processes killed", m.Cgroup, m.CgroupID, r.Drained), nil
}

// removeOrphanTable removes the table from the host netns, or from the
// joined netns if it still exists, and says how it went. A private netns
// dies with its last process (the drain's, at the latest) and takes the
// table along.
func removeOrphanTable(ctx context.Context, m marker) (string, error) {
	var path string
	switch m.Netns {
	case netnsHost:
		path = "/proc/self/ns/net"
	case netnsPath:
		path = m.NetnsPath
	default:
		return spec.TableWithNetns, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && m.Netns == netnsPath {
		return spec.TableWithNetns, nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := netpolicy.RemoveIfPresent(ctx, int(f.Fd()), m.Table); err != nil {
		return "", err
	}
	return spec.TableDeleted, nil
}
