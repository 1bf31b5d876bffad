package retention

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Why an operation must stay, whatever the limits say.
const (
	KeepRunning    = "running"     // no manifest.json yet: the task may still run
	KeepHostRun    = "host_run"    // a host run's in-progress marker is present
	KeepNotDeleted = "not_deleted" // exited, but its task was not deleted (no cleaned marker)
	KeepAttention  = "attention"   // its attention is set
)

// Where an operation's task is, as its records say.
const (
	StateRunning = "running" // no manifest yet, or a host run's marker
	StateExited  = "exited"  // manifest written, task not deleted yet
	StateDeleted = "deleted" // deleted, nothing of it left but the record
)

// Op is what the state directory says about one operation record.
type Op struct {
	ID         string
	Namespace  string    // from admission.json; "" when it is missing
	Container  string    // from admission.json
	ContractID string    // the manifest's, else admission.json's
	Verdict    string    // the gate's verdict; "" while running
	Created    time.Time // admission.json created_at, else the directory's mtime
	Finished   time.Time // when manifest.json was written; zero while running
	State      string    // StateRunning | StateExited | StateDeleted
	Attention  bool      // a finding is open (no person cleared it)
	Findings   int       // findings ever raised, cleared or not
	Bytes      int64     // regular files below the directory (Scan with sizes)
	Keep       string    // why it must stay, "" when it may go
}

// Scan reads every operation record. With sizes it also adds up each
// record's bytes (a walk of its directory, staged products included).
// A record that cannot be read is still listed, with what could be read,
// and is kept.
func Scan(st record.Store, sizes bool) ([]Op, error) {
	ids, err := st.Operations()
	if err != nil {
		return nil, fmt.Errorf("list operations in %s: %w", st.Dir, err)
	}
	out := make([]Op, 0, len(ids))
	for _, id := range ids {
		op, err := scanOne(st, id, sizes)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		out = append(out, op)
	}
	return out, nil
}

// maxRecordBytes bounds what Scan reads of admission.json and
// manifest.json (the runtime's own bounds are 4 MiB for both).
const maxRecordBytes = 8 << 20

func scanOne(st record.Store, id string, sizes bool) (Op, error) {
	op := Op{ID: id}
	dir, err := st.OperationDir(id)
	if err != nil {
		return op, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return op, err
	}
	op.Created = fi.ModTime()
	var adm spec.Admission
	if b, _, err := readRecord(dir, record.AdmissionFile); err == nil && json.Unmarshal(b, &adm) == nil {
		op.Namespace, op.Container, op.ContractID = adm.Namespace, adm.ContainerID, adm.ContractID
		if !adm.CreatedAt.IsZero() {
			op.Created = adm.CreatedAt
		}
	}
	op.Keep = keepReason(st, dir, id)
	var m struct {
		Contract struct {
			ID string `json:"id"`
		} `json:"contract"`
		Gate struct {
			Verdict string `json:"verdict"`
		} `json:"gate"`
	}
	if b, mtime, err := readRecord(dir, record.ManifestFile); !mtime.IsZero() {
		op.Finished = mtime // an oversize manifest still marks the end
		if err == nil && json.Unmarshal(b, &m) == nil {
			op.Verdict = m.Gate.Verdict
			if m.Contract.ID != "" {
				op.ContractID = m.Contract.ID
			}
		}
	}
	op.Attention, op.Findings = findings(dir)
	switch {
	case op.Finished.IsZero() || op.Keep == KeepHostRun:
		op.State = StateRunning
	case exists(filepath.Join(dir, record.CleanedMarker)):
		op.State = StateDeleted
	default:
		op.State = StateExited
	}
	if sizes {
		op.Bytes = dirBytes(dir)
	}
	return op, nil
}

// keepReason says why the record in dir must stay, or "". It is checked
// again right before a removal.
func keepReason(st record.Store, dir, id string) string {
	switch {
	case exists(filepath.Join(st.Dir, record.HostRunsDir, id+".json")):
		return KeepHostRun
	case openFindings(dir):
		return KeepAttention
	case !exists(filepath.Join(dir, record.ManifestFile)):
		return KeepRunning
	case !exists(filepath.Join(dir, record.CleanedMarker)):
		return KeepNotDeleted
	}
	return ""
}

// openFindings reports whether the operation in dir has a finding no
// person has cleared (the attention record outlives the task and keeps
// the cleared ones as history). A record that cannot be read counts as
// open: it stays until a person looks.
func openFindings(dir string) bool {
	open, _ := findings(dir)
	return open
}

// findings reads the attention record in dir: whether a finding is open
// (an unreadable record counts as open) and how many were ever raised.
func findings(dir string) (open bool, n int) {
	if !exists(filepath.Join(dir, record.AttentionFile)) {
		return false, 0
	}
	a, _, err := events.ReadAttentionIn(dir)
	if err != nil {
		return true, 0
	}
	return len(a.Open()) > 0, len(a.Findings)
}

// exists reports whether path names anything (a symlink counts: it is not
// the runtime's, and is never followed). An error other than "does not
// exist" counts as present, so a record that cannot be checked stays.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// readRecord reads a runtime record without following a symlink at its
// last component, refusing anything but a regular file and more than
// maxRecordBytes (fsafe). mtime is set once the file is open, even when
// it is too large to read.
func readRecord(dir, name string) (b []byte, mtime time.Time, err error) {
	f, st, err := fsafe.OpenFile(filepath.Join(dir, name))
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	b, err = fsafe.ReadAll(f, st, maxRecordBytes)
	return b, time.Unix(st.Mtim.Sec, st.Mtim.Nsec), err
}

// dirBytes adds up the sizes of the regular files below dir. WalkDir never
// follows a symlink (staged products may hold some).
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // count what can be read
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
