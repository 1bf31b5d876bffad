package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
)

// BundleMarker names the file written into a task's bundle once its
// operation has a table, so that `shim delete` after a dead shim finds the
// operation without the runtime options.
const BundleMarker = "gensee-operation.json"

// BundleMark is the bundle marker's content.
type BundleMark struct {
	OperationID string         `json:"operation_id"`
	StateDir    string         `json:"state_dir"`
	Table       string         `json:"table"`
	Netns       spec.NetnsKind `json:"netns"`
	NetnsPath   string         `json:"netns_path,omitempty"`
	InitPID     int            `json:"init_pid"`
	StartTime   uint64         `json:"start_time"`
}

// ReadBundleMark reads bundle's marker; found is false when it has none.
func ReadBundleMark(bundle string) (m BundleMark, found bool, err error) {
	b, err := fsafe.ReadFile(filepath.Join(bundle, BundleMarker), 1<<16)
	if errors.Is(err, os.ErrNotExist) {
		return BundleMark{}, false, nil
	}
	if err != nil {
		return BundleMark{}, false, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return BundleMark{}, false, fmt.Errorf("decode %s: %w", BundleMarker, err)
	}
	return m, true, nil
}

// Cleaned reports whether the operation m names is marked cleaned: nothing
// of it is left to remove. An error says it cannot be told (the full
// shim's cleanup then goes on as for an operation not cleaned).
func (m BundleMark) Cleaned() (bool, error) {
	p, err := m.CleanedPath()
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// CleanedPath is the cleaned marker of the operation m names.
func (m BundleMark) CleanedPath() (string, error) {
	dir, err := Store{Dir: m.StateDir}.OperationDir(m.OperationID)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, CleanedMarker), nil
}
