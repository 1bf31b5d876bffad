package record

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/gensee/gensee/internal/fsafe"
)

// File names inside an operation directory.
const (
	AdmissionFile = "admission.json"
	ManifestFile  = "manifest.json"
	EventsFile    = "events.jsonl"
	StagedDir     = "staged"
	CleanedMarker = "cleaned"
	// BaselineFile is the gate's baseline of the upperdir (gate.Baseline),
	// taken before the workload ran, where a door keeps it on disk.
	BaselineFile = "baseline.json"
	refusalsFile = "refusals.jsonl"
)

// Store is the state directory.
type Store struct{ Dir string }

var (
	opIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{32}$`) })
	// containerd's identifier rules: alphanumerics, '.', '_', '-', up to 76.
	namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$`) })
)

// NewOperationID returns a fresh operation id: 128 random bits in hex. Its
// first 12 characters name the operation's nftables table, so they must be
// random, not a timestamp.
func NewOperationID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate operation id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ValidOperationID reports whether id has the shape NewOperationID makes.
func ValidOperationID(id string) bool { return opIDPattern().MatchString(id) }

// ValidName reports whether s is a valid containerd identifier (a
// namespace's or a container's name).
func ValidName(s string) bool { return len(s) <= 76 && namePattern().MatchString(s) }

// OperationsDir is the directory every operation's directory is in.
func (s Store) OperationsDir() string { return filepath.Join(s.Dir, "operations") }

// OperationDir is the directory of operation id.
func (s Store) OperationDir(id string) (string, error) {
	if !ValidOperationID(id) {
		return "", fmt.Errorf("operation id %q is malformed", id)
	}
	return filepath.Join(s.OperationsDir(), id), nil
}

// CreateOperation makes the operation's directory (0700) and indexes it.
func (s Store) CreateOperation(id, namespace, container string) (string, error) {
	dir, err := s.MakeOperationDir(id)
	if err != nil {
		return "", err
	}
	if err := s.IndexOperation(namespace, container, id); err != nil {
		return "", err
	}
	return dir, nil
}

// MakeOperationDir is CreateOperation's directory alone: a caller that
// indexes the operation (IndexOperation) beside other work.
func (s Store) MakeOperationDir(id string) (string, error) {
	dir, err := s.OperationDir(id)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("create operations dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("create operation dir: %w", err)
	}
	return dir, nil
}

func (s Store) indexPath(namespace, container string) (string, error) {
	if !ValidName(namespace) {
		return "", fmt.Errorf("namespace %q is not a valid containerd identifier", namespace)
	}
	if !ValidName(container) {
		return "", fmt.Errorf("container id %q is not a valid containerd identifier", container)
	}
	return filepath.Join(s.Dir, "index", namespace, container), nil
}

// IndexOperation points namespace/container at id, durably. A container
// id reused after delete points at its newest operation.
func (s Store) IndexOperation(namespace, container, id string) error {
	p, err := s.indexPath(namespace, container)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("create index dir: %w", err)
	}
	return WriteFileAtomic(p, []byte(id+"\n"), 0o600)
}

// Lookup returns the newest operation id of namespace/container.
func (s Store) Lookup(namespace, container string) (string, error) {
	p, err := s.indexPath(namespace, container)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no operation recorded for container %s in namespace %s (state dir %s): %w", container, namespace, s.Dir, err)
		}
		return "", fmt.Errorf("read index: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !ValidOperationID(id) {
		return "", fmt.Errorf("index %s holds a malformed operation id", p)
	}
	return id, nil
}

// WriteJSON writes v as indented JSON to name inside the operation dir:
// EncodeJSON's bytes, by WriteBytes.
func (s Store) WriteJSON(id, name string, v any) error {
	b, err := EncodeJSON(name, v)
	if err != nil {
		return err
	}
	return s.WriteBytes(id, name, b)
}

// PrepareJSON is WriteJSON up to the rename: v written and fsynced under a
// temporary name in the operation dir, for the caller to put in place
// (Commit: the rename and the directory's fsync) or to drop (Abort). A
// crash before Commit leaves no file of that name.
func (s Store) PrepareJSON(id, name string, v any) (*fsafe.Pending, error) {
	b, err := EncodeJSON(name, v)
	if err != nil {
		return nil, err
	}
	dir, err := s.OperationDir(id)
	if err != nil {
		return nil, err
	}
	return fsafe.Prepare(filepath.Join(dir, name), bytes.NewReader(b), 0o600, fsafe.Durable)
}

// EncodeJSON is v as a record file holds it (WriteJSON): indented, one
// newline at the end; name is only for the error.
func EncodeJSON(name string, v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", name, err)
	}
	return append(b, '\n'), nil
}

// WriteBytes writes b as name inside the operation dir, atomically and
// fsynced (WriteFileAtomic).
func (s Store) WriteBytes(id, name string, b []byte) error {
	dir, err := s.OperationDir(id)
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, name), b, 0o600)
}

// WriteMarker writes v as <state>/<sub>/<id>.json, atomically: the
// per-operation markers a front door keeps outside the operation's records
// (who owns a running operation, what to clean if it died). Not fsynced
// (ReplaceFile), as the shim's bundle marker is not: what a marker names
// (a cgroup, a table, a process) is kernel state that ends with the
// machine, and a crash of the process alone loses no written page.
func (s Store) WriteMarker(sub, id string, v any) error {
	dir := filepath.Join(s.Dir, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", sub, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ReplaceFile(filepath.Join(dir, id+".json"), b, 0o600)
}

// ReadJSON decodes name inside the operation dir into v.
func (s Store) ReadJSON(id, name string, v any) error {
	dir, err := s.OperationDir(id)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Operations lists operation ids (in no particular order).
func (s Store) Operations() ([]string, error) {
	ents, err := os.ReadDir(s.OperationsDir())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && ValidOperationID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}
