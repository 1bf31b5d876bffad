package hostrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
)

// runsDir holds one marker per host run in progress, written before its
// cgroup or table exist and removed once both are gone; a marker whose
// owner (the gensee parent, by pid and start time) is dead names an orphan.
const runsDir = "hostruns"

type marker struct {
	OperationID string `json:"operation_id"`
	Table       string `json:"table"`
	Cgroup      string `json:"cgroup"`
	OwnerPID    int    `json:"owner_pid"`
	OwnerStart  uint64 `json:"owner_start"`
}

func markerPath(stateDir, opID string) string {
	return filepath.Join(stateDir, runsDir, opID+".json")
}

func writeMarker(stateDir string, m marker) error {
	return record.Store{Dir: stateDir}.WriteMarker(runsDir, m.OperationID, m)
}

// self is this process as a marker's owner.
func self() (int, uint64, error) {
	st, err := cgroup.ReadStat(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	return os.Getpid(), st.Start, nil
}

// alive reports whether the marker's owner still runs.
func (m marker) alive() bool {
	st, err := cgroup.ReadStat(m.OwnerPID)
	return err == nil && st.Start == m.OwnerStart
}

// CleanOrphans removes what host runs whose gensee parent died left: the
// cgroup (drained), the table in the host netns, the marker. It returns
// the operation ids it cleaned.
func CleanOrphans(ctx context.Context, stateDir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(stateDir, runsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", runsDir, err)
	}
	var cleaned []string
	var errs []error
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(stateDir, runsDir, e.Name()))
		if err != nil {
			continue
		}
		var m marker
		if json.Unmarshal(b, &m) != nil || !record.ValidOperationID(m.OperationID) || m.alive() {
			continue
		}
		if err := removeLeftovers(ctx, stateDir, m); err != nil {
			errs = append(errs, err)
			continue
		}
		log.G(ctx).WithField("operation_id", m.OperationID).Warn("removed the cgroup and table of a host run whose gensee process died")
		cleaned = append(cleaned, m.OperationID)
	}
	return cleaned, errors.Join(errs...)
}

// removeLeftovers removes m's cgroup and table, then its marker, and marks
// the operation cleaned.
func removeLeftovers(ctx context.Context, stateDir string, m marker) error {
	if m.Cgroup != "" {
		h, err := cgroup.Find()
		if err != nil {
			return err
		}
		if err := removeCgroup(ctx, h, m.Cgroup); err != nil {
			return err
		}
	}
	if m.Table != "" {
		if err := removeTable(ctx, m.Table); err != nil {
			return err
		}
	}
	if dir, err := (record.Store{Dir: stateDir}).OperationDir(m.OperationID); err == nil {
		if _, err := os.Stat(dir); err == nil {
			record.WriteFileAtomic(filepath.Join(dir, record.CleanedMarker), []byte("by a later gensee boundary run\n"), 0o600)
		}
	}
	if err := os.Remove(markerPath(stateDir, m.OperationID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// removeTable deletes table name from the host netns if it is there.
func removeTable(ctx context.Context, name string) error {
	f, err := os.Open("/proc/self/ns/net")
	if err != nil {
		return err
	}
	defer f.Close()
	return netpolicy.RemoveIfPresent(ctx, int(f.Fd()), name)
}
