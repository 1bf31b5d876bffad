package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
)

// helperGate runs the product gate in a helper process (gaterun.go): the
// operation's warm helper (warmGate), or one Prepare starts beside the
// drain, handed its input by Run once nothing writes to the diff any more.
// An upper dir with a recorded baseline is gated in the shim first, and a
// helper is readied only if it holds more than its baseline.
type helperGate struct {
	op      *operation
	spawned chan preparedGate // prepare's helper and input; run takes them
}

// preparedGate is what prepare readies beside the drain: the helper (nil
// if none could be started) and its input, encoded (nil if it could not
// be: run then says why).
type preparedGate struct {
	h     *gateHelper
	input []byte
}

func (g *helperGate) Prepare(ctx context.Context, started time.Time) {
	// No diff to hand a helper; or Run gates a baseline-only upper dir in
	// the shim first and takes a helper only when it must (start).
	if g.op.diff.Problem != "" || g.baselineFirst() {
		return
	}
	g.start(ctx, started)
}

// baselineFirst is whether Run tries the gate in the shim first: an
// upper dir with a recorded baseline (gate.Input.BaselineOnly).
func (g *helperGate) baselineFirst() bool {
	return g.op.diff.Upper != "" && g.op.baseline != nil
}

// start readies a helper and its input beside the caller: the
// operation's warm helper if it is still there (warmGate), else one
// started now, whose exec and start-up run beside the drain. The input
// is encoded there too: it names only what the operation fixed at Create
// and the start time.
func (g *helperGate) start(ctx context.Context, started time.Time) {
	g.spawned = make(chan preparedGate, 1)
	go func() {
		var p preparedGate
		if p.h = g.op.warm.take(); p.h == nil {
			var err error
			if p.h, err = spawnGateHelper(false); err != nil {
				g.op.logger(ctx).WithError(err).Warn("start gate helper; the gate starts one after it")
			}
		}
		if in, err := g.input(started); err == nil {
			p.input, _ = json.Marshal(in)
		}
		g.spawned <- p
	}()
}

// input is the gate's input for a task that started at started.
func (g *helperGate) input(started time.Time) (gate.Input, error) {
	op, src := g.op, g.op.diff
	dir, err := op.store.OperationDir(op.id)
	if err != nil {
		return gate.Input{}, err
	}
	return gate.Input{
		UpperDir: src.Upper, LowerDirs: src.Lowers, UserXattr: src.UserXattr, RootDir: src.Root,
		Workspace: op.contract.WorkspaceOrDefault(), Products: op.contract.Products,
		StagingDir: filepath.Join(dir, record.StagedDir), StartTime: started,
		ExcludeMounts: op.mounts, FailUnclaimed: op.contract.FailUnclaimed(), Baseline: op.baseline,
	}, nil
}

func (g *helperGate) Run(ctx context.Context, started time.Time) engine.GateOutcome {
	op := g.op
	src := op.diff
	if src.Problem != "" {
		return engine.NoDiff(src.Problem, op.contract)
	}
	// An upper directory that holds only its baseline, unchanged, holds
	// nothing of the workload's: the gate runs here, in the shim, as a
	// host run's does (engine.InProcess: staged copies made durable
	// before the manifest names them; bounded and recovered by
	// engine.Finish.runGate), without a helper. It stops at the first
	// entry of the workload's (gate.Input.BaselineOnly), having read only
	// its metadata as the walk reads every entry's, and a helper then
	// runs the whole gate.
	if g.baselineFirst() {
		o := engine.InProcess{Input: func(started time.Time) (gate.Input, error) {
			in, err := g.input(started)
			in.BaselineOnly = true
			return in, err
		}}.Run(ctx, started)
		if !errors.Is(o.Err, gate.ErrBeyondBaseline) {
			if errors.Is(o.Err, context.DeadlineExceeded) || errors.Is(o.Err, context.Canceled) { // the exit path says which end
				o.Err = fmt.Errorf("during its pass in the shim: %w", o.Err)
			}
			return o
		}
		g.start(ctx, started)
	}
	var p preparedGate
	if g.spawned != nil {
		p = <-g.spawned
		g.spawned = nil
	}
	defer func() {
		if p.h != nil { // not handed to runGate: let it exit, without waiting for it here
			go p.h.abandon()
		}
	}()
	input := p.input
	if input == nil {
		in, err := g.input(started)
		if err != nil {
			return engine.GateOutcome{Ran: true, Err: err}
		}
		if input, err = json.Marshal(in); err != nil {
			return engine.GateOutcome{Ran: true, Err: fmt.Errorf("encode gate input: %w", err)}
		}
	}
	// The gate's context ended while the helper was readied (the warm
	// one taken or one spawned) or the baseline pass ran: none is handed
	// an input only to be killed, and the deferred abandon lets it go.
	if err := ctx.Err(); err != nil {
		return engine.GateOutcome{Ran: true, Err: fmt.Errorf("before its helper was handed its input: %w", err)}
	}
	used := p.h
	p.h = nil
	res, err := runGate(used, input, helperLimit(ctx, engine.GateLimitFor(op.cfg.GateTimeout.Duration)))
	return engine.GateOutcome{Ran: true, Res: res, Err: err}
}

// helperLimit is how long the helper may take from its input on: the
// gate's limit (engine.GateLimitFor, never 0), or what is left of it when
// the gate's context (bounded by the same limit from the gate's start,
// after the drain) ends sooner, after the baseline pass in the shim and
// the helper's start-up. The helper is killed at it: none goes on staging
// files past the exit path's limit, after the manifest that names none
// of them.
func helperLimit(ctx context.Context, limit time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(min(time.Until(d), limit), 0)
	}
	return limit
}
