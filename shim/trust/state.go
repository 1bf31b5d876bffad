package trust

import (
	"path/filepath"
	"time"
)

// State is the catalog high-water mark: the highest catalog version
// accepted on this host and the sha256 of its payload (lowercase hex).
type State struct {
	Version       uint64    `json:"version"`
	PayloadSHA256 string    `json:"payload_sha256"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// StateStore persists the high-water mark across shim processes.
type StateStore interface {
	// Update calls fn with the stored state (found is false when no catalog
	// was ever accepted) while holding the store's exclusive lock, and
	// persists next when fn returns write == true. An error from fn is
	// returned as is and nothing is written. Holding the lock across read,
	// decide and write keeps two shims loading versions 5 and 6 at once
	// from lowering the mark back to 5.
	Update(fn func(cur State, found bool) (next State, write bool, err error)) error
}

// StateFileName is the high-water file inside the operator's state_dir.
const StateFileName = "catalog-state.json"

// StateFile returns the high-water file path for stateDir (state_dir in the
// operator config, default /var/lib/gensee).
func StateFile(stateDir string) string { return filepath.Join(stateDir, StateFileName) }
