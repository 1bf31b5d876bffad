package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
)

// bundleMarker is written into the bundle once an operation has a table, so
// the cleanup path of a dead shim can find it without the runtime options.
const bundleMarker = "gensee-operation.json"

type marker struct {
	OperationID string `json:"operation_id"`
	StateDir    string `json:"state_dir"`
	Table       string `json:"table"`
	Netns       string `json:"netns"`
	NetnsPath   string `json:"netns_path,omitempty"`
	InitPID     int    `json:"init_pid"`
	StartTime   uint64 `json:"start_time"`
}

func (op *operation) writeMarker() error {
	sub := op.admission.Subject
	m := marker{OperationID: op.id, StateDir: op.cfg.StateDir, Table: op.admission.Table,
		Netns: op.admission.Netns, NetnsPath: op.admission.NetnsPath, InitPID: sub.InitPID, StartTime: sub.StartTime}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// The bundle (containerd's state dir, /run) and the netns the marker
	// names end with the machine: no fsync on Create's path.
	return record.ReplaceFile(filepath.Join(op.bundle, bundleMarker), b, 0o600)
}

// markCleaned records that nothing of the operation is left to remove.
func (s *service) markCleaned(ctx context.Context, op *operation) {
	dir, err := op.store.OperationDir(op.id)
	if err == nil {
		// Not fsynced: on Delete's path, and a marker lost to a crash
		// only keeps the record (retention: not_deleted).
		err = record.ReplaceFile(filepath.Join(dir, record.CleanedMarker), nil, 0o600)
	}
	if err != nil {
		op.logger(ctx).WithError(err).Warn("mark operation cleaned")
	}
}

// cleanupBundle removes the table of the operation recorded in bundle
// unless its records say it is already gone. Idempotent.
func cleanupBundle(ctx context.Context, bundle string) error {
	b, err := fsafe.ReadFile(filepath.Join(bundle, bundleMarker), 1<<16)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decode %s: %w", bundleMarker, err)
	}
	st := record.Store{Dir: m.StateDir}
	dir, err := st.OperationDir(m.OperationID)
	if err != nil {
		return err
	}
	cleaned := filepath.Join(dir, record.CleanedMarker)
	if _, err := os.Stat(cleaned); err == nil {
		return nil
	}
	f, err := openRecordedNetns(m)
	if err != nil {
		return err
	}
	if f != nil {
		defer f.Close()
		if err := netpolicy.Remove(ctx, int(f.Fd()), m.Table); err != nil {
			return fmt.Errorf("remove table %s: %w", m.Table, err)
		}
	}
	return record.WriteFileAtomic(cleaned, []byte("by shim cleanup\n"), 0o600)
}

// openRecordedNetns opens the netns the operation's table lives in, or
// returns nil when that netns is gone (a private netns dies with its last
// process, and its table with it).
func openRecordedNetns(m marker) (*os.File, error) {
	switch netnsKind(m.Netns) {
	case netnsHost:
		return os.Open("/proc/self/ns/net")
	case netnsPath:
		f, err := os.Open(m.NetnsPath)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return f, err
	default:
		sub, err := readSubject(m.InitPID)
		if err != nil || sub.StartTime != m.StartTime {
			return nil, nil
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", m.InitPID))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return f, err
	}
}
