package events

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// AttentionFile is an operation's attention flag. Present means flagged.
const AttentionFile = "attention.json"

// attentionLock serializes the shim raising and a person clearing (two
// processes): each read-modify-write holds an flock on it.
const attentionLock = ".attention.lock"

// RaiseAttention adds finding f to operation opID's attention, setting it
// if it is not set. An earlier finding is never replaced. It returns the
// attention as written.
func RaiseAttention(s record.Store, opID string, f spec.Finding) (spec.Attention, error) {
	var a spec.Attention
	err := withAttention(s, opID, func(path string) error {
		cur, ok, err := readAttention(path)
		if err != nil {
			return err
		}
		if !ok {
			cur = spec.Attention{OperationID: opID, State: spec.AttentionControlDefeat}
		}
		f.Detail = Redact(f.Detail)
		for i := range f.Evidence {
			f.Evidence[i] = Sanitize(f.Evidence[i])
		}
		cur.Findings = append(cur.Findings, f)
		b, err := json.MarshalIndent(cur, "", "  ")
		if err != nil {
			return fmt.Errorf("encode attention: %w", err)
		}
		a = cur
		return record.WriteFileAtomic(path, append(b, '\n'), 0o600)
	})
	if err != nil {
		return spec.Attention{}, fmt.Errorf("raise attention on %s: %w", opID, err)
	}
	return a, nil
}

// ClearAttention records that a person looked at operation opID: every
// open finding gets c (who, when, a note). Nothing is deleted: the
// findings stay the operation's history. It reports how many findings it
// cleared (0: none was open).
//
// A record that does not parse cannot carry a clearing: it is kept as
// DamagedAttentionFile (replacing an earlier one) and ErrAttentionDamaged
// returned with n 1, so the operation no longer reads as needing
// attention while the damaged bytes stay for a person to read.
func ClearAttention(s record.Store, opID string, c spec.Clearing) (int, error) {
	var n int
	err := withAttention(s, opID, func(path string) error {
		cur, ok, err := readAttention(path)
		if err != nil {
			if _, serr := os.Lstat(path); serr != nil {
				return err
			}
			if rerr := os.Rename(path, filepath.Join(filepath.Dir(path), DamagedAttentionFile)); rerr != nil {
				return fmt.Errorf("%w; keep it aside: %v", err, rerr)
			}
			n = 1
			if err := record.SyncDir(filepath.Dir(path)); err != nil {
				return err
			}
			return fmt.Errorf("%w (%v): kept as %s", ErrAttentionDamaged, err, DamagedAttentionFile)
		}
		if !ok {
			return nil
		}
		c.Note = Redact(c.Note)
		for i := range cur.Findings {
			if cur.Findings[i].Cleared == nil {
				cl := c
				cur.Findings[i].Cleared = &cl
				n++
			}
		}
		if n == 0 {
			return nil
		}
		b, err := json.MarshalIndent(cur, "", "  ")
		if err != nil {
			return fmt.Errorf("encode attention: %w", err)
		}
		return record.WriteFileAtomic(path, append(b, '\n'), 0o600)
	})
	if err != nil {
		return n, fmt.Errorf("clear attention on %s: %w", opID, err)
	}
	return n, nil
}

// DamagedAttentionFile is where ClearAttention keeps an attention record
// that did not parse.
const DamagedAttentionFile = "attention.damaged.json"

// ErrAttentionDamaged: the attention record did not parse; clearing kept
// it aside.
var ErrAttentionDamaged = errors.New("the attention record did not parse")

// ReadAttention reads operation opID's attention record; ok is false when
// no finding was ever raised (a.Open says which still need a person).
func ReadAttention(s record.Store, opID string) (a spec.Attention, ok bool, err error) {
	dir, err := s.OperationDir(opID)
	if err != nil {
		return a, false, fmt.Errorf("read attention: %w", err)
	}
	return readAttention(filepath.Join(dir, AttentionFile))
}

// ReadAttentionIn reads the attention record of the operation whose
// directory is dir (retention's scan, which walks directories).
func ReadAttentionIn(dir string) (a spec.Attention, ok bool, err error) {
	return readAttention(filepath.Join(dir, AttentionFile))
}

// Findings is every finding raised on operation opID, cleared or not:
// what its manifest reports (a finding a person cleared while the task ran
// still happened).
func Findings(s record.Store, opID string) ([]spec.Finding, error) {
	a, _, err := ReadAttention(s, opID)
	return a.Findings, err
}

// ListAttention returns every operation with a finding, open ones only
// unless all, the oldest first finding first.
func ListAttention(s record.Store, all bool) ([]spec.Attention, error) {
	ids, err := s.Operations()
	if err != nil {
		return nil, fmt.Errorf("list attention: %w", err)
	}
	var out []spec.Attention
	for _, id := range ids {
		a, ok, err := ReadAttention(s, id)
		if err != nil {
			return nil, fmt.Errorf("list attention: %w", err)
		}
		if ok && (all || len(a.Open()) > 0) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(x, y spec.Attention) int {
		if len(x.Findings) == 0 || len(y.Findings) == 0 {
			return cmp.Compare(len(x.Findings), len(y.Findings))
		}
		return x.Findings[0].At.Compare(y.Findings[0].At)
	})
	return out, nil
}

// maxAttentionBytes bounds attention.json. Findings accumulate until a
// person clears them, each a few KiB at most: the bound is far above any
// real file and only stops a runaway one from being read whole.
const maxAttentionBytes = 64 << 20

func readAttention(path string) (spec.Attention, bool, error) {
	var a spec.Attention
	b, err := fsafe.ReadFile(path, maxAttentionBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return a, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("read attention: %w", err)
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, false, fmt.Errorf("read attention %s: %w", path, err)
	}
	return a, a.State != "", nil
}

// withAttention runs fn on the attention file's path under its lock.
func withAttention(s record.Store, opID string, fn func(path string) error) error {
	dir, err := s.OperationDir(opID)
	if err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(dir, attentionLock), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("open attention lock: %w", err)
	}
	defer lf.Close() // releases the lock
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock attention: %w", err)
	}
	return fn(filepath.Join(dir, AttentionFile))
}
