package engine

import (
	"context"
	"time"

	"github.com/gensee/gensee/shim/gate"
)

// InProcess is the gate run in the calling process: a hook's monitor
// process and a host run's parent each serve one operation, so a failure
// costs that operation's manifest only (the shim, which serves every
// container of a pod, runs its gate in a helper process instead). Input
// gives the gate's input for a workload that started at started; Skip,
// when it returns an outcome, is the gate's answer without running it (a
// workload with no diff: NoDiff).
type InProcess struct {
	Input func(started time.Time) (gate.Input, error)
	Skip  func() (GateOutcome, bool)
}

// Prepare has nothing to start ahead of the drain.
func (InProcess) Prepare(context.Context, time.Time) {}

// Run gates the diff into staging and makes the staged copies durable
// before the manifest that names them.
func (g InProcess) Run(ctx context.Context, started time.Time) GateOutcome {
	if g.Skip != nil {
		if o, ok := g.Skip(); ok {
			return o
		}
	}
	in, err := g.Input(started)
	if err != nil {
		return GateOutcome{Ran: true, Err: err}
	}
	res, err := gate.Run(ctx, in)
	if err == nil {
		if err = gate.SyncStaged(in.StagingDir, res); err != nil {
			res = nil
		}
	}
	return GateOutcome{Ran: true, Res: res, Err: err}
}
