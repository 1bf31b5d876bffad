package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
)

func (op *operation) writeMarker() error {
	sub := op.admission.Subject
	m := record.BundleMark{OperationID: op.id, StateDir: op.cfg.StateDir, Table: op.admission.Table,
		Netns: op.admission.Netns, NetnsPath: op.admission.NetnsPath, InitPID: sub.InitPID, StartTime: sub.StartTime}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// The bundle (containerd's state dir, /run) and the netns the marker
	// names end with the machine: no fsync on Create's path.
	return record.ReplaceFile(filepath.Join(op.bundle, record.BundleMarker), b, 0o600)
}

// markCleaned records that nothing of the operation is left to remove.
func (s *service) markCleaned(ctx context.Context, op *operation) {
	if err := op.store.MarkCleaned(op.id, ""); err != nil {
		op.logger(ctx).WithError(err).Warn("mark operation cleaned")
	}
}

// cleanupBundle removes the table of the operation recorded in bundle
// unless its records say it is already gone. Idempotent.
func cleanupBundle(ctx context.Context, bundle string) error {
	m, found, err := record.ReadBundleMark(bundle)
	if err != nil || !found {
		return err
	}
	cleaned, err := m.CleanedPath()
	if err != nil {
		return err
	}
	// Only a cleaned marker seen says so: a marker that cannot be looked
	// at leaves the table to remove.
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
func openRecordedNetns(m record.BundleMark) (*os.File, error) {
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
