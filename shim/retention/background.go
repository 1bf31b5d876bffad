package retention

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Bounds of the shim's background runs: at most one a minute per state
// directory, each removing at most backgroundRemovals records within
// backgroundTimeout. gensee prune has none of these bounds.
const (
	backgroundInterval = time.Minute
	backgroundTimeout  = 30 * time.Second
	backgroundRemovals = 100
	stampFile          = "retention.stamp" // its mtime: when the last background run finished
)

// Background enforces p on st in a goroutine and returns at once: the
// shim calls it after a task's Delete, never on the start path. A run that
// is not due, or finds another holding the lock, does nothing. It logs
// what it removed through ctx's logger and never writes to stdout. The
// shim may exit before the run ends; the removal order makes that safe.
func Background(ctx context.Context, st record.Store, p Policy, notify func(opID string, f spec.Finding)) {
	if p.Unlimited() || st.Dir == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		stamp := filepath.Join(st.Dir, stampFile)
		if fi, err := os.Stat(stamp); err == nil && time.Since(fi.ModTime()) < backgroundInterval {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, backgroundTimeout)
		defer cancel()
		rep, err := Run(ctx, st, p, time.Now(), Options{MaxRemovals: backgroundRemovals, Notify: notify})
		if errors.Is(err, ErrBusy) {
			return
		}
		l := log.G(ctx).WithField("state_dir", st.Dir)
		if err != nil {
			l.WithError(err).Warn("enforce records retention")
		}
		for _, m := range rep.Mismatched {
			l.WithField("operation", m.ID).WithField("problems", m.Problems).WithField("slots", m.Slots).
				WithField("findings_raised", m.Raised).
				Error("records retention kept an operation: its staged products do not match its manifest (product_mismatch; gensee attention list)")
		}
		if len(rep.Removed) > 0 || rep.Refusals.Lines > 0 {
			l.WithField("removed", len(rep.Removed)).WithField("freed_bytes", rep.Freed).
				WithField("refusal_lines_dropped", rep.Refusals.Lines).Info("records retention")
		}
		now := time.Now()
		if err := os.WriteFile(stamp, nil, 0o600); err == nil {
			os.Chtimes(stamp, now, now)
		}
	}()
}
