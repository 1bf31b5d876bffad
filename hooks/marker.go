package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

func markerPath(stateDir, opID string) string {
	return filepath.Join(stateDir, markersDir, opID+".json")
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
	os.Remove(markerPath(stateDir, opID))
}

func (o owner) alive() bool {
	st, err := cgroup.ReadStat(o.PID)
	return err == nil && st.Start == o.Start
}

func selfOwner() (owner, error) {
	st, err := cgroup.ReadStat(os.Getpid())
	if err != nil {
		return owner{}, err
	}
	return owner{PID: os.Getpid(), Start: st.Start}, nil
}

// CleanOrphans removes what operations whose monitor died left: the table
// (in the host netns, or in the joined netns if it still exists; a private
// netns died with its last process and took the table along), the marker
// and the socket; the operation is marked cleaned. It returns the
// operation ids it cleaned.
func CleanOrphans(ctx context.Context, stateDir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(stateDir, markersDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", markersDir, err)
	}
	var cleaned []string
	var errs []error
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(stateDir, markersDir, e.Name()))
		if err != nil {
			continue
		}
		var m marker
		if json.Unmarshal(b, &m) != nil || !record.ValidOperationID(m.OperationID) || m.Monitor.alive() {
			continue
		}
		if err := removeOrphan(ctx, stateDir, m); err != nil {
			errs = append(errs, err)
			continue
		}
		log.G(ctx).WithField("operation_id", m.OperationID).WithField("container_id", m.ContainerID).
			Warn("removed the table of an OCI hook operation whose monitor process died")
		cleaned = append(cleaned, m.OperationID)
	}
	return cleaned, errors.Join(errs...)
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
	if dir, err := (record.Store{Dir: stateDir}).OperationDir(m.OperationID); err == nil {
		if _, err := os.Stat(dir); err == nil {
			record.WriteFileAtomic(filepath.Join(dir, record.CleanedMarker), []byte("by a later OCI hook: the monitor process had died\n"), 0o600)
		}
	}
	removeMarker(stateDir, m.OperationID)
	return nil
}
