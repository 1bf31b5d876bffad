package hooks

import (
	"context"
	"errors"
	"fmt"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
)

// takeBaseline records the container's upperdir as it is before the init
// runs (gate.Baseline) in the operation's baseline.json: podman (libpod)
// makes /etc/mtab there before runc creates the container, and a
// restarted container's upperdir holds what its earlier runs wrote;
// neither is this workload's. bind calls it while the init is blocked in
// runc init, before the table is installed. Past gate.MaxBaselineEntries
// the error says what to do, and createRuntime refuses the container.
func (op *operation) takeBaseline(ctx context.Context) error {
	src := op.adm.Diff
	if src.Problem != "" || src.Upper == "" {
		return nil // no upperdir to gate (gate.NoDiff at exit)
	}
	b, err := gate.TakeBaseline(ctx, src.Upper)
	if errors.Is(err, gate.ErrBaselineTooLarge) {
		return refuse(ReasonRootfsReused, "podman rm the container and run it again from its image (a fresh container has a fresh upperdir)", "%v", err)
	}
	if err != nil {
		return err
	}
	return op.store.WriteJSON(op.req.OperationID, record.BaselineFile, b)
}

// baseline is what takeBaseline recorded; nil when there is no upperdir.
// bind wrote it before the container could start, so a missing or
// unreadable one is an error: a failed gate.
func (op *operation) baseline() (*gate.Baseline, error) {
	if op.adm.Diff.Problem != "" || op.adm.Diff.Upper == "" {
		return nil, nil
	}
	var b gate.Baseline
	if err := op.store.ReadJSON(op.req.OperationID, record.BaselineFile, &b); err != nil {
		return nil, fmt.Errorf("read the upperdir's baseline %s: %w", record.BaselineFile, err)
	}
	return &b, nil
}
