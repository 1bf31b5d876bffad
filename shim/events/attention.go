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

// ClearAttention clears operation opID's attention: a person's decision or
// the task's end. It reports whether anything was set.
func ClearAttention(s record.Store, opID string) (bool, error) {
	var had bool
	err := withAttention(s, opID, func(path string) error {
		err := os.Remove(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		}
		had = true
		return record.SyncDir(filepath.Dir(path))
	})
	if err != nil {
		return false, fmt.Errorf("clear attention on %s: %w", opID, err)
	}
	return had, nil
}

// ReadAttention reads operation opID's attention; ok is false when none is
// set.
func ReadAttention(s record.Store, opID string) (a spec.Attention, ok bool, err error) {
	dir, err := s.OperationDir(opID)
	if err != nil {
		return a, false, fmt.Errorf("read attention: %w", err)
	}
	return readAttention(filepath.Join(dir, AttentionFile))
}

// ListAttention returns every operation whose attention is set, the oldest
// first finding first.
func ListAttention(s record.Store) ([]spec.Attention, error) {
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
		if ok {
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
