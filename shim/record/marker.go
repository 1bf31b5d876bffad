package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Marker is what a front door's per-operation marker (WriteMarker) says of
// itself to CleanOrphans.
type Marker interface {
	// Operation is the id of the operation the marker was written for.
	Operation() string
	// Orphaned reports whether the marker's owner is gone, so what the
	// marker names is left for someone else to clean.
	Orphaned() bool
}

// CleanOrphans calls clean for every marker under <state>/<sub> that
// decodes into an M, names a well-formed operation id and is Orphaned, and
// returns the ids clean succeeded for and the other errors joined. Files
// that are not markers (another suffix, unreadable, not an M) are skipped,
// never removed: WriteMarker renames a marker into place, so none is ever
// half-written, and what cannot be read is left for a later scan. No
// directory means no markers. clean owns the marker file: it removes it
// (RemoveMarker) once what the marker names is gone.
func CleanOrphans[M Marker](s Store, sub string, clean func(M) error) ([]string, error) {
	dir := filepath.Join(s.Dir, sub)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", sub, err)
	}
	var cleaned []string
	var errs []error
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var m M
		if json.Unmarshal(b, &m) != nil || !ValidOperationID(m.Operation()) || !m.Orphaned() {
			continue
		}
		if err := clean(m); err != nil {
			errs = append(errs, err)
			continue
		}
		cleaned = append(cleaned, m.Operation())
	}
	return cleaned, errors.Join(errs...)
}

// RemoveMarker removes the marker WriteMarker wrote as <state>/<sub>/<id>.json;
// one already gone is no error.
func (s Store) RemoveMarker(sub, id string) error {
	if err := os.Remove(filepath.Join(s.Dir, sub, id+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// MarkCleaned writes operation id's cleaned marker (what retention reads as
// "nothing of it is left in the kernel"), saying by whom when by is not
// empty, if the operation's directory is still there: retention may have
// removed an old one. Every door writes it here, on its exit or delete
// path, and without fsync (ReplaceFile): a marker a crash loses only
// keeps the record longer (retention: not_deleted).
func (s Store) MarkCleaned(id, by string) error {
	dir, err := s.OperationDir(id)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var b []byte
	if by != "" {
		b = []byte(by + "\n")
	}
	return ReplaceFile(filepath.Join(dir, CleanedMarker), b, 0o600)
}
