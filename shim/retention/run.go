package retention

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// lockFile serializes retention runs of every process (shims, gensee
// prune) on one state directory.
const lockFile = "retention.lock"

// ErrBusy: another retention run holds the state directory's lock.
var ErrBusy = errors.New("another retention run holds the state directory")

// Options shape one Run.
type Options struct {
	DryRun bool // decide and report; remove nothing
	// Wait for the lock until ctx is done; otherwise return ErrBusy at once.
	Wait bool
	// MaxRemovals bounds the operation records one run removes (0: no
	// bound); the next run goes on.
	MaxRemovals int
	// Notify, when set, is told of every finding a re-verification
	// raised (the operator's notify command).
	Notify func(opID string, f spec.Finding)
}

// Report is what a Run did (or, dry, would do).
type Report struct {
	Decision
	Removed []Removal // what was removed (dry: what would be)
	Skipped []Removal // decided, then found to be needed again (Keep set since, or KeepMismatch/KeepUnverified)
	// Mismatched are the records decided for removal whose staged
	// products, re-hashed first, did not match their manifest: kept (they
	// are in Skipped too), the finding raised unless the run is dry.
	Mismatched []Mismatched
	Refusals   RefusalTrim
	Freed      int64 // bytes of the removed records
}

// Run enforces p on the state directory once, at time now. Errors removing
// one record do not stop the others; the first is returned with the report.
func Run(ctx context.Context, st record.Store, p Policy, now time.Time, o Options) (Report, error) {
	var rep Report
	unlock, err := lock(ctx, st, o.Wait)
	if err != nil {
		return rep, err
	}
	defer unlock()
	if !o.DryRun {
		if err := st.SweepTrash(); err != nil {
			return rep, err
		}
	}
	ops, err := Scan(st, true) // sizes: max_bytes, and what a removal frees
	if err != nil {
		return rep, err
	}
	rep.Decision = Decide(ops, p, now)
	var first error
	if o.DryRun {
		first = rep.apply(ctx, st, now, 0, true, o.Notify)
		var err error
		rep.Refusals, err = PlanRefusals(st, p, now)
		if first == nil {
			first = err
		}
	} else {
		first = rep.apply(ctx, st, now, o.MaxRemovals, false, o.Notify)
		t, err := TrimRefusals(st, p, now)
		rep.Refusals = t
		if first == nil {
			first = err
		}
	}
	for _, r := range rep.Removed {
		rep.Freed += r.Bytes
	}
	return rep, first
}

// apply removes the decided records, oldest first: each one's index
// entries, then its directory. Right before, it checks again that the
// record may go and re-hashes its staged products (recheck); a mismatch
// keeps it and raises the finding. Dry, it only checks and re-hashes, and
// lists what would go in Removed.
func (rep *Report) apply(ctx context.Context, st record.Store, now time.Time, max int, dry bool, notify func(string, spec.Finding)) error {
	idx, err := st.Index()
	if err != nil {
		return err
	}
	byOp := map[string][]record.IndexEntry{}
	for _, e := range idx {
		byOp[e.Operation] = append(byOp[e.Operation], e)
	}
	var first error
	for _, r := range rep.Remove {
		if ctx.Err() != nil || (max > 0 && len(rep.Removed) >= max) {
			break
		}
		dir, err := st.OperationDir(r.ID)
		if err != nil {
			continue
		}
		if why := keepReason(st, dir, r.ID); why != "" {
			r.Keep = why
			rep.Skipped = append(rep.Skipped, r)
			continue
		}
		mm, err := recheck(st, dir, r.Op, now, !dry, notify)
		if mm != nil {
			rep.Mismatched = append(rep.Mismatched, *mm)
			r.Keep = KeepMismatch
		} else if err != nil {
			r.Keep = KeepUnverified
		}
		if err != nil && first == nil {
			first = err
		}
		if r.Keep != "" {
			rep.Skipped = append(rep.Skipped, r)
			continue
		}
		if dry {
			rep.Removed = append(rep.Removed, r)
			continue
		}
		if err := remove(st, r.ID, byOp[r.ID]); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		rep.Removed = append(rep.Removed, r)
	}
	return first
}

// remove takes id's index entries away, then its directory: a reader who
// finds an entry always finds a whole record.
func remove(st record.Store, id string, entries []record.IndexEntry) error {
	for _, e := range entries {
		if _, err := st.Unindex(e.Namespace, e.Container, id); err != nil {
			return fmt.Errorf("remove operation %s: %w", id, err)
		}
	}
	return st.RemoveOperation(id)
}

// lock takes the state directory's retention lock; unlock releases it.
func lock(ctx context.Context, st record.Store, wait bool) (unlock func(), err error) {
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(st.Dir, lockFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open retention lock: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if !wait {
			f.Close()
			return nil, ErrBusy
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
