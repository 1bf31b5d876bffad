package hooks

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
)

// markersDir holds, per operation in progress, a marker written before its
// table exists and removed once it is gone, and the monitor's socket. A
// marker whose monitor (by pid and start time) is dead names an orphan.
const markersDir = "ocihooks"

type marker struct {
	OperationID string `json:"operation_id"`
	ContainerID string `json:"container_id"`
	Table       string `json:"table"`
	Netns       string `json:"netns"`
	NetnsPath   string `json:"netns_path,omitempty"`
	Monitor     owner  `json:"monitor"`
}

// socketPath is where operation opID's monitor listens for poststop.
func socketPath(stateDir, opID string) string {
	return filepath.Join(stateDir, markersDir, opID+".sock")
}

func writeMarker(stateDir string, m marker) error {
	return record.Store{Dir: stateDir}.WriteMarker(markersDir, m.OperationID, m)
}

func removeMarker(stateDir, opID string) {
	os.Remove(socketPath(stateDir, opID))
	record.Store{Dir: stateDir}.RemoveMarker(markersDir, opID)
}

func (m marker) Operation() string { return m.OperationID }

// Orphaned: the monitor (by pid and start time) is gone.
func (m marker) Orphaned() bool { return !cgroup.Proc(m.Monitor).Alive() }

func selfOwner() (owner, error) {
	p, err := cgroup.Self()
	return owner(p), err
}

// CleanOrphans removes what operations whose monitor died left: the table
// (in the host netns, or in the joined netns if it still exists; a private
// netns died with its last process and took the table along), the marker
// and the socket; the operation is marked cleaned. It returns the
// operation ids it cleaned.
func CleanOrphans(ctx context.Context, stateDir string) ([]string, error) {
	return record.CleanOrphans(record.Store{Dir: stateDir}, markersDir, func(m marker) error {
		if err := removeOrphan(ctx, stateDir, m); err != nil {
			return err
		}
		log.G(ctx).WithField("operation_id", m.OperationID).WithField("container_id", m.ContainerID).
			Warn("removed the table of an OCI hook operation whose monitor process died")
		return nil
	})
}

func removeOrphan(ctx context.Context, stateDir string, m marker) error {
	var f *os.File
	var err error
	switch m.Netns {
	case netnsHost:
		f, err = os.Open("/proc/self/ns/net")
	case netnsPath:
		f, err = os.Open(m.NetnsPath)
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	if f != nil {
		defer f.Close()
		if err := netpolicy.RemoveIfPresent(ctx, int(f.Fd()), m.Table); err != nil {
			return err
		}
	}
	_ = record.Store{Dir: stateDir}.MarkCleaned(m.OperationID, "by a later OCI hook: the monitor process had died") // losing it only keeps the record longer
	removeMarker(stateDir, m.OperationID)
	return nil
}
