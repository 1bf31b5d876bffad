package reference

import (
	"sync"
	"time"

	"github.com/gensee/gensee/shim/trust"
)

// LoadCatalog loads the trust anchor at anchorPath and the catalog it
// verifies at catalogPath, as the runtime does (trust.LoadAnchor,
// trust.LoadCatalog), except that the catalog high-water mark is kept in
// memory: the analyzer never writes the runtime's state. A rolled-back
// catalog here can only make the analyzer sign less or differently; the
// runtime verifies every inference against its own catalog.
func LoadCatalog(anchorPath, catalogPath string, now time.Time) (*trust.Loaded, error) {
	anchor, err := trust.LoadAnchor(anchorPath)
	if err != nil {
		return nil, err
	}
	return trust.LoadCatalog(catalogPath, anchor, &memoryState{}, now)
}

// memoryState is a trust.StateStore that lives as long as the process.
type memoryState struct {
	mu    sync.Mutex
	cur   trust.State // guarded by mu
	found bool        // guarded by mu
}

func (s *memoryState) Update(fn func(cur trust.State, found bool) (trust.State, bool, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, write, err := fn(s.cur, s.found)
	if err != nil {
		return err
	}
	if write {
		s.cur, s.found = next, true
	}
	return nil
}
