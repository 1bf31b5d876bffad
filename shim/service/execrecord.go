package service

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/specpolicy"
)

// execsFile holds the operation's exec admission records, one JSON line
// each, in its directory.
const execsFile = "execs.jsonl"

// maxExecsBytes bounds execsFile: an exec probe every ten seconds would
// otherwise grow it for as long as the pod runs. Past it the execs are
// still admitted under the same rules, not recorded.
const maxExecsBytes = 1 << 20

// execAdmission is an exec's admission record: what it was admitted with
// under the init's rules (specpolicy.CheckExecBound) and what was removed.
type execAdmission struct {
	ExecID              string    `json:"exec_id"`
	AdmittedAt          time.Time `json:"admitted_at"`
	CapabilitiesRemoved []string  `json:"capabilities_removed,omitempty"`
	NoNewPrivileges     bool      `json:"no_new_privileges"`
	specpolicy.ExecBound
}

// recordExec appends exec id's admission record before runc runs it, one
// write of one line (O_APPEND). Not fsynced: on the exec's path, and the
// init's admission record, whose rules the exec was held to, is durable.
// A full file is not an error (maxExecsBytes).
func (op *operation) recordExec(id string, removed []string, bound specpolicy.ExecBound) error {
	dir, err := op.store.OperationDir(op.id)
	if err != nil {
		return err
	}
	b, err := json.Marshal(execAdmission{ExecID: id, AdmittedAt: time.Now().UTC(), CapabilitiesRemoved: removed, NoNewPrivileges: true, ExecBound: bound})
	if err != nil {
		return fmt.Errorf("encode exec record: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, execsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", execsFile, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size()+int64(len(b))+1 > maxExecsBytes {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("append to %s: %w", execsFile, err)
	}
	return nil
}
