package hooks

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// exitFacts is what the exit path learned, in the order it learned it:
// engine.Exit's part as every front door learns it, and the hook's own.
type exitFacts struct {
	engine.Exit
	exitedAt time.Time
	poststop bool // finished at poststop (false: Grace passed without one)
	// cleanup, when set, is the not_enforced line of an operation whose
	// monitor died, finished by a later hook (writeOrphanManifest).
	cleanup string
}

// finish is the exit path: drain (if the init's exit was not seen yet),
// gate on the upperdir into staging, counters, table removal, manifest.
// Idempotent; the second call returns nil, nil.
func (op *operation) finish(ctx context.Context, poststop bool) (*spec.Manifest, error) {
	op.drain(ctx)
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.finished {
		return nil, nil
	}
	op.finished = true
	x := &op.x
	x.poststop = poststop
	x.GateRes, x.GateRan, x.GateErr = op.runGate(ctx)
	for _, ev := range engine.GateEvents(x.GateRes, x.GateErr) {
		op.mon.Note(ev)
	}
	op.mon.StopSensors()
	x.Drift = op.mon.Drift()
	x.Attempts = op.mon.Finish(x.Counted(netpolicy.ReadCounters(ctx, int(op.netns.Fd()), op.plan)))
	x.Removed = op.removeTable(ctx)
	op.mon.Close()
	m := op.manifest(*x)
	werr := op.store.WriteJSON(op.req.OperationID, record.ManifestFile, m)
	if x.Removed != "" && record.ValidOperationID(op.req.OperationID) {
		_ = op.store.MarkCleaned(op.req.OperationID, "") // losing it only keeps the record longer
		removeMarker(op.store.Dir, op.req.OperationID)
	}
	closeFD(op.pidfd)
	op.log.WithField("verdict", m.Gate.Verdict).WithField("poststop", poststop).Info("exit path done")
	if werr != nil {
		return m, fmt.Errorf("write manifest: %w", werr)
	}
	if x.Removed == "" {
		return m, fmt.Errorf("the network table %s could not be removed; the next hook retries", op.plan.Table)
	}
	return m, nil
}

// runGate gates the diff, bounded by the operator's gate timeout. The gate
// runs in this monitor process (one per operation, so a failure costs this
// operation's manifest only); a panic is a failed verdict.
func (op *operation) runGate(ctx context.Context) (res *gate.Result, ran bool, err error) {
	src := op.adm.Diff
	c := op.adm.Contract
	if src.Problem != "" {
		if len(c.Products) == 0 && !c.FailUnclaimed() {
			return nil, false, nil
		}
		return nil, true, fmt.Errorf("no diff to gate: %s", src.Problem)
	}
	dir, err := op.store.OperationDir(op.req.OperationID)
	if err != nil {
		return nil, true, err
	}
	gctx, cancel := context.WithTimeout(ctx, op.req.gateTimeout())
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			op.log.WithField("stack", string(debug.Stack())).Error("product gate panicked")
			res, ran, err = nil, true, fmt.Errorf("the product gate failed: %v", r)
		}
	}()
	in := gate.Input{
		UpperDir: src.Upper, LowerDirs: src.Lowers, UserXattr: src.UserXattr,
		Workspace: c.WorkspaceOrDefault(), Products: c.Products,
		StagingDir: filepath.Join(dir, record.StagedDir), StartTime: op.ready,
		ExcludeMounts: op.adm.Mounts, FailUnclaimed: c.FailUnclaimed(),
	}
	if res, err = gate.Run(gctx, in); err == nil {
		// Durable before finish writes the manifest that names them.
		if err = gate.SyncStaged(in.StagingDir, res); err != nil {
			res = nil
		}
	}
	return res, true, err
}

// removeTable removes the table and releases the netns; it returns how the
// table went, or "" when it is still installed. A private netns made by
// runc dies with its last reference, ours once the container is gone, and
// its table with it; a joined or host netns outlives the container.
func (op *operation) removeTable(ctx context.Context) string {
	how := spec.TableWithNetns
	if op.adm.Netns != netnsPrivate {
		if err := netpolicy.RemoveIfPresent(ctx, int(op.netns.Fd()), op.plan.Table); err != nil {
			op.log.WithError(err).Error("remove network table")
			return ""
		}
		how = spec.TableDeleted
	}
	op.netns.Close()
	return how
}
