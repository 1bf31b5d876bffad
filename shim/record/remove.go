package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HostRunsDir holds one marker per host run in progress (shim/hostrun
// writes <state>/hostruns/<opid>.json before the run's cgroup or table
// exist and removes it once both are gone). An operation with a marker is
// still running.
const HostRunsDir = "hostruns"

// AttentionFile is an operation's attention flag (shim/events owns it):
// present means a person has not looked yet.
const AttentionFile = "attention.json"

// trashPrefix names an operation directory being removed. It is no valid
// operation id, so Operations never lists it.
const trashPrefix = ".removing-"

// IndexEntry is one index file: namespace/container points at Operation.
type IndexEntry struct {
	Namespace, Container, Operation string
}

// Index lists every index entry. An entry that does not name a valid
// operation id is skipped.
func (s Store) Index() ([]IndexEntry, error) {
	root := filepath.Join(s.Dir, "index")
	nss, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	var out []IndexEntry
	for _, ns := range nss {
		if !ns.IsDir() || !namePattern().MatchString(ns.Name()) {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(root, ns.Name()))
		if err != nil {
			return nil, fmt.Errorf("read index: %w", err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || !namePattern().MatchString(e.Name()) {
				continue
			}
			id, err := s.Lookup(ns.Name(), e.Name())
			if err != nil {
				continue
			}
			out = append(out, IndexEntry{Namespace: ns.Name(), Container: e.Name(), Operation: id})
		}
	}
	return out, nil
}

// Unindex removes the index entry of namespace/container if, and only if,
// it still points at id: a task created meanwhile for the same container
// id points the entry at its own operation, and that entry stays. It
// reports whether an entry was removed.
//
// The entry is renamed aside, read, and removed when it is id's; when it
// is not, it is linked back unless a newer entry took its place (link(2)
// never replaces). Between the two a reader may not find the entry.
func (s Store) Unindex(namespace, container, id string) (bool, error) {
	p, err := s.indexPath(namespace, container)
	if err != nil {
		return false, err
	}
	cur, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read index %s: %w", p, err)
	}
	if strings.TrimSpace(string(cur)) != id {
		return false, nil
	}
	aside := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".unindex-"+id)
	if err := os.Rename(p, aside); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("unindex %s/%s: %w", namespace, container, err)
	}
	b, err := os.ReadFile(aside)
	if err != nil {
		return false, fmt.Errorf("unindex %s/%s: %w", namespace, container, err)
	}
	if strings.TrimSpace(string(b)) != id {
		// Rewritten between the read and the rename: put it back.
		if err := os.Link(aside, p); err != nil && !errors.Is(err, os.ErrExist) {
			return false, fmt.Errorf("restore index %s/%s: %w", namespace, container, err)
		}
		os.Remove(aside)
		return false, SyncDir(filepath.Dir(p))
	}
	if err := os.Remove(aside); err != nil {
		return false, fmt.Errorf("unindex %s/%s: %w", namespace, container, err)
	}
	return true, SyncDir(filepath.Dir(p))
}

// RemoveOperation removes operation id's directory. The caller removes its
// index entries first (Unindex), so a crash at any point leaves either a
// complete record or none that a reader can find: the directory is renamed
// aside in one step (and the rename made durable) before its contents go.
// A leftover from a crash is removed by SweepTrash.
func (s Store) RemoveOperation(id string) error {
	dir, err := s.OperationDir(id)
	if err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	trash := filepath.Join(parent, trashPrefix+id)
	if err := os.Rename(dir, trash); err != nil {
		return fmt.Errorf("remove operation %s: %w", id, err)
	}
	if err := SyncDir(parent); err != nil {
		return err
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("remove operation %s: %w", id, err)
	}
	return nil
}

// SweepTrash removes what a RemoveOperation interrupted by a crash left.
func (s Store) SweepTrash() error {
	parent := s.OperationsDir()
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read operations dir: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), trashPrefix) && ValidOperationID(strings.TrimPrefix(e.Name(), trashPrefix)) {
			if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
				return fmt.Errorf("remove %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}
