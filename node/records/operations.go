package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// maxAdmissionBytes bounds admission.json (as the CLI does).
const maxAdmissionBytes = 4 << 20

// opState is what the reader keeps of an operation in memory.
type opState struct {
	op        Operation
	admission spec.Admission
	// adm is admission.json's stamp when last read: unchanged, it is not
	// read again.
	adm stamp
	// attention.json's size and mtime when last read: unchanged, it is
	// not read again.
	attSize  int64
	attMtime unix.Timespec
}

// stamp tells one version of a file from another: the runtime writes its
// records atomically (a new inode), or at least with a new size or mtime.
type stamp struct {
	ino  uint64
	size int64
	mtim unix.Timespec
}

// stampOf is the stamp of the file at path.
func stampOf(path string) (stamp, error) {
	var s unix.Stat_t
	if err := unix.Lstat(path, &s); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return stamp{}, fs.ErrNotExist
		}
		return stamp{}, fmt.Errorf("stat %s: %w", filepath.Base(path), err)
	}
	return stamp{ino: s.Ino, size: s.Size, mtim: s.Mtim}, nil
}

// pollOperations reads the operations' new records, within b, and
// forgets the operations retention removed.
func (r *Reader) pollOperations(b *budget) ([]Record, error) {
	ids, err := r.store.Operations()
	if err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	live := make(map[string]bool, len(ids))
	var out []Record
	var errs []error
	for _, id := range ids {
		live[id] = true
		if b.spent() {
			continue // the next Poll's
		}
		recs, err := r.pollOperation(id, b)
		out = append(out, recs...)
		if err != nil {
			errs = append(errs, fmt.Errorf("operation %s: %w", id, err))
		}
	}
	for id := range r.cur.Operations {
		if !live[id] {
			delete(r.cur.Operations, id)
			delete(r.ops, id)
		}
	}
	for id := range r.badAdm {
		if !live[id] {
			delete(r.badAdm, id)
		}
	}
	return out, errors.Join(errs...)
}

// pollOperation reads one operation's new records: its admission once
// bound (never for one rolled back before), its egress denials (within
// b), its manifest's gate verdicts once written and its denials all read,
// and its new findings. An operation without admission.json yet is left
// for the next Poll.
func (r *Reader) pollOperation(id string, b *budget) ([]Record, error) {
	dir, err := r.store.OperationDir(id)
	if err != nil {
		return nil, err
	}
	st, err := r.state(id, dir)
	if err != nil || st == nil {
		return nil, err
	}
	c := r.cur.Operations[id]
	if c == nil {
		c = &opCursor{}
		r.cur.Operations[id] = c
	}
	ended := c.Manifest
	var m *spec.Manifest
	if !c.Manifest {
		if m, err = readManifest(filepath.Join(dir, record.ManifestFile)); err != nil {
			// Written atomically: one that does not parse (or is too
			// large) stays so. Counted once, never read again.
			c.Manifest, m = true, nil
			r.Malformed++
		}
	}
	out := r.admitted(st, dir, c, ended)
	n, err := follow(filepath.Join(dir, record.EventsFile), &c.Events, b, func(line []byte) {
		e, perr := spec.ParseEvent(line)
		switch {
		case perr != nil:
			r.Malformed++
		case e.Kind == spec.EventEgressDenied:
			out = append(out, EgressDenied{Op: st.op, Event: *e})
		}
	})
	r.Malformed += n
	if err != nil {
		return out, err
	}
	// The gate after the operation's denials: with the budget spent,
	// some may be left, and the manifest is read again next Poll.
	if !c.Manifest && m != nil && !b.spent() {
		c.Manifest = true
		out = append(out, gateOf(st.op, st.admission.Contract, m, m2time(dir)))
	}
	found, err := r.newFindings(st, dir, c)
	return append(out, found...), err
}

// admitted is the operation's Admission once it is bound. Until then
// admission.json is read again whenever it changes (it is written again
// once bound: subject, timing); one that does not parse keeps the labels
// already read. Once the operation ended (its manifest was read before)
// unbound, it never will be: it is not read again.
func (r *Reader) admitted(st *opState, dir string, c *opCursor, ended bool) []Record {
	if c.Admitted || ended {
		return nil
	}
	if err := r.reloadAdmission(st, dir); err != nil {
		r.Malformed++
	}
	// Admitted and bound: the subject is recorded with the bind (an
	// operation rolled back before it has a manifest, never a subject).
	if st.admission.Subject == nil {
		return nil
	}
	c.Admitted = true
	a := st.admission
	reason := "admitted"
	if a.SafeDefault {
		reason = "safe_default"
	}
	return []Record{Admission{Op: st.op, At: a.CreatedAt, Reason: reason, FallbackFrom: a.FallbackFrom, Timing: a.Timing}}
}

// state is the operation's cached labels, read from admission.json the
// first time (nil, nil while it is not written yet). One that does not
// parse is counted malformed once, and read again only once it changed.
func (r *Reader) state(id, dir string) (*opState, error) {
	if st := r.ops[id]; st != nil {
		return st, nil
	}
	path := filepath.Join(dir, record.AdmissionFile)
	s, err := stampOf(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if bad, ok := r.badAdm[id]; ok && bad == s {
		return nil, nil
	}
	st := &opState{adm: s}
	r.admReads++
	b, err := fsafe.ReadFile(path, maxAdmissionBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &st.admission); err != nil {
		r.Malformed++
		r.badAdm[id] = s
		return nil, nil
	}
	delete(r.badAdm, id)
	a := st.admission
	st.op = Operation{ID: id, Namespace: a.Namespace, Container: a.ContainerID, Selector: a.Selector, Contract: a.ContractID, Pod: a.Kubernetes}
	r.ops[id] = st
	return st, nil
}

// reloadAdmission reads admission.json again if it changed since it was
// last read: the bound one (subject, timing) replaces the one persisted
// before the bind. One that does not parse is not read again unchanged.
func (r *Reader) reloadAdmission(st *opState, dir string) error {
	path := filepath.Join(dir, record.AdmissionFile)
	s, err := stampOf(path)
	if err != nil || s == st.adm {
		return err
	}
	r.admReads++
	b, err := fsafe.ReadFile(path, maxAdmissionBytes)
	if err != nil {
		return err
	}
	st.adm = s
	var a spec.Admission
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("read admission: %w", err)
	}
	st.admission = a
	st.op.Pod, st.op.Selector, st.op.Contract = a.Kubernetes, a.Selector, a.ContractID
	return nil
}

// readManifest parses manifest.json; nil while it is not written.
func readManifest(path string) (*spec.Manifest, error) {
	b, err := fsafe.ReadFile(path, spec.MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m spec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return &m, nil
}

// m2time is when the manifest was written (its mtime; now if unknown).
func m2time(dir string) time.Time {
	if fi, err := os.Lstat(filepath.Join(dir, record.ManifestFile)); err == nil {
		return fi.ModTime().UTC()
	}
	return time.Now().UTC()
}

// newFindings returns the findings of attention.json past those already
// reported; attention.json only ever grows (findings are appended, a
// clearing is recorded on one, never removes it).
func (r *Reader) newFindings(st *opState, dir string, c *opCursor) ([]Record, error) {
	var s unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, events.AttentionFile), &s); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("stat attention: %w", err)
	}
	if s.Size == st.attSize && s.Mtim == st.attMtime {
		return nil, nil
	}
	a, ok, err := events.ReadAttentionIn(dir)
	if err != nil || !ok {
		return nil, err
	}
	st.attSize, st.attMtime = s.Size, s.Mtim
	var out []Record
	for i := c.Findings; i < len(a.Findings); i++ {
		out = append(out, Finding{Op: st.op, Finding: a.Findings[i]})
	}
	c.Findings = max(c.Findings, len(a.Findings))
	return out, nil
}
