package gate

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/gensee/gensee/shim/walk"
	"golang.org/x/sys/unix"
)

// MaxBaselineEntries bounds a baseline: a fresh snapshot's upper directory
// is empty, or holds the engine's few entries (runc's mount stubs, podman's
// /etc/mtab), so more means a snapshot reused or filled before the start,
// which the gate could not tell from the workload's own writes at this
// cost. TakeBaseline fails past it (ErrBaselineTooLarge).
const MaxBaselineEntries = 4096

// MaxBaselinePathBytes bounds the bytes of a baseline's paths (each entry's
// full relative path): 4096 entries of 256 bytes. Entries alone would not
// bound them (a chain of nested directories with long names), nor the
// memory and the JSON a door keeps (the gate helper's input is capped at
// HelperInputLimit). Past it TakeBaseline fails too.
const MaxBaselinePathBytes = 1 << 20

// ErrBaselineTooLarge is TakeBaseline's error when the upper directory
// holds more than MaxBaselineEntries entries or MaxBaselinePathBytes of
// paths; the front door refuses the container with a fix.
var ErrBaselineTooLarge = errors.New("upper directory too large for a baseline")

// Baseline is an overlay upper directory as it was before the workload's
// first instruction: what the container engine (podman's /etc/mtab, runc's
// mount stubs), an earlier run of a restarted container or the client (a
// reused or pre-written snapshot) put there. An entry found at exit as the
// baseline recorded it was not written by the workload (see the package
// comment, "Baseline").
type Baseline struct {
	Entries []BaselineEntry `json:"entries"`
}

// BaselineEntry identifies one entry of the upper directory. Any change
// to the object (content, mode, owner, times, xattrs, links, a rename onto
// or off its path, a replacement) changes its ctime or its inode, and
// ctime cannot be set from userspace.
type BaselineEntry struct {
	Path  string `json:"path"`     // relative to the upper directory, '/'-separated
	Type  uint32 `json:"type"`     // st_mode & S_IFMT
	Ino   uint64 `json:"ino"`      // st_ino
	Ctime int64  `json:"ctime_ns"` // st_ctime in nanoseconds since the epoch
}

// TakeBaseline records every entry of the upper directory upper, walked
// as the gate walks (package walk: one component at a time from pinned
// directory fds, nothing followed, only directories opened). Entries the
// walk could not examine, and names that are not valid UTF-8 (JSON would
// not carry them faithfully), are left out with what is below them: they
// count as the workload's at exit, never the reverse. More than
// MaxBaselineEntries entries or MaxBaselinePathBytes of paths is
// ErrBaselineTooLarge, wrapped in a sentence that says what to do.
func TakeBaseline(ctx context.Context, upper string) (*Baseline, error) {
	tree, err := walk.Open(upper, walk.Options{MaxNames: MaxBaselineEntries})
	if err != nil {
		return nil, fmt.Errorf("gate baseline: %w", err)
	}
	defer tree.Close()
	b := &Baseline{Entries: []BaselineEntry{}}
	pathBytes := 0
	err = tree.Walk(ctx, func(e *walk.Entry) (bool, error) {
		if pathBytes += len(e.Path); pathBytes > MaxBaselinePathBytes {
			return false, ErrBaselineTooLarge
		}
		if e.Err != nil || !utf8.ValidString(e.Path) {
			return false, nil
		}
		b.Entries = append(b.Entries, BaselineEntry{Path: e.Path, Type: e.Stat.Mode & unix.S_IFMT,
			Ino: e.Stat.Ino, Ctime: e.Stat.Ctime.UnixNano()})
		return e.Kind == walk.KindDir, nil
	})
	var le *walk.LimitError
	switch {
	case errors.As(err, &le) || errors.Is(err, ErrBaselineTooLarge):
		return nil, fmt.Errorf("the container's upper directory %s holds more than %d entries or %d bytes of paths before its workload runs (a snapshot an earlier run or the client wrote into): the gate cannot tell them from the workload's own changes; run it on a fresh snapshot (a new container, a new snapshot key): %w",
			upper, MaxBaselineEntries, MaxBaselinePathBytes, ErrBaselineTooLarge)
	case err != nil:
		return nil, fmt.Errorf("gate baseline: %w", err)
	}
	return b, nil
}

// baselineSet is a Baseline ready for lookups during a run.
type baselineSet struct {
	byPath map[string]BaselineEntry
	fresh  time.Time // the run's StartTime - FreshSlack
}

func newBaselineSet(b *Baseline, fresh time.Time) (*baselineSet, error) {
	if b == nil {
		return nil, nil
	}
	if len(b.Entries) > MaxBaselineEntries {
		return nil, fmt.Errorf("gate input: baseline of %d entries, more than %d", len(b.Entries), MaxBaselineEntries)
	}
	s := &baselineSet{byPath: make(map[string]BaselineEntry, len(b.Entries)), fresh: fresh}
	n := 0
	for _, e := range b.Entries {
		s.byPath[e.Path] = e
		n += len(e.Path)
	}
	if n > MaxBaselinePathBytes {
		return nil, fmt.Errorf("gate input: baseline of %d bytes of paths, more than %d", n, MaxBaselinePathBytes)
	}
	return s, nil
}

// holds reports whether e is the object the baseline recorded at its path,
// unchanged: same type, inode and ctime. An entry whose ctime is within
// FreshSlack of the start never matches: the coarse clock that stamps
// ctime could give a replacement made just after the start the same
// stamp (and a reused inode number the same inode).
func (s *baselineSet) holds(e *walk.Entry) bool {
	if s == nil {
		return false
	}
	b, ok := s.byPath[e.Path]
	return ok && b.Type == e.Stat.Mode&unix.S_IFMT && b.Ino == e.Stat.Ino &&
		b.Ctime == e.Stat.Ctime.UnixNano() && e.Stat.Ctime.Before(s.fresh)
}

// baselineDetail explains a product entry that was there before the start.
const baselineDetail = "this entry was in the upper directory before the workload started (left by the engine, an earlier run on the same snapshot or the client) and has not changed since: the workload did not write it; write the product during the task"
