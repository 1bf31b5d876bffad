package hostrun

import (
	"context"
	"errors"
	"io/fs"
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

func writeMarker(stateDir string, m marker) error {
	return record.Store{Dir: stateDir}.WriteMarker(runsDir, m.OperationID, m)
}

func (m marker) Operation() string { return m.OperationID }

// Orphaned: the marker's owner (by pid and start time) is gone.
func (m marker) Orphaned() bool {
	return !cgroup.Proc{PID: m.OwnerPID, Start: m.OwnerStart}.Alive()
}

// CleanOrphans removes what host runs whose gensee parent died left: the
// cgroup (drained), the table in the host netns, the marker. It returns
// the operation ids it cleaned.
func CleanOrphans(ctx context.Context, stateDir string) ([]string, error) {
	return record.CleanOrphans(record.Store{Dir: stateDir}, runsDir, func(m marker) error {
		if err := removeLeftovers(ctx, stateDir, m); err != nil {
			return err
		}
		log.G(ctx).WithField("operation_id", m.OperationID).Warn("removed the cgroup and table of a host run whose gensee process died")
		return nil
	})
}

// removeLeftovers removes m's cgroup and table, then its marker, and marks
// the operation cleaned; an operation without admission.json (put in place
// only after the table's read-back, before the go) never ran its command,
// and its record goes too, as a run that does not start is discarded.
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
	st := record.Store{Dir: stateDir}
	if neverWent(st, m.OperationID) {
		st.Unindex(Namespace, m.OperationID, m.OperationID)
		if st.RemoveOperation(m.OperationID) == nil {
			return st.RemoveMarker(runsDir, m.OperationID)
		}
	}
	_ = st.MarkCleaned(m.OperationID, "by a later gensee boundary run") // losing it only keeps the record longer
	return st.RemoveMarker(runsDir, m.OperationID)
}

// neverWent: the operation's record exists without its admission.json,
// so its command never got the go.
func neverWent(st record.Store, id string) bool {
	dir, err := st.OperationDir(id)
	if err != nil {
		return false
	}
	if _, err := os.Lstat(dir); err != nil {
		return false
	}
	_, err = os.Lstat(filepath.Join(dir, record.AdmissionFile))
	return errors.Is(err, fs.ErrNotExist)
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
