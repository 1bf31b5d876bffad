package service

import (
	"context"
	"errors"
	"time"

	"github.com/gensee/gensee/shim/gate"
)

// takeBaseline records the task's upperdir as it is before the init runs
// (gate.Baseline): bind calls it while the init is blocked in runc init,
// before the table is installed, and the gate helper gets it in its input.
//
// Why the shim takes one, though containerd adds nothing of its own to a
// fresh snapshot (podman's /etc/mtab is the hooks' case): a client can
// create the task on an active snapshot an earlier run wrote into (a
// container re-created over its snapshot key, WithSnapshot of an existing
// one), or write into the snapshot itself before Create (mount it, copy
// files in, then create the task). Without a baseline those writes are
// this task's unclaimed changes, fail unclaimed "fail", and a file at a
// product slot that is not in the image is staged as this task's product.
// What a client writes after Create and before Start (a copy into the
// created task) is past the baseline and counts as the task's.
//
// Cost, on Create's path: one walk of the upper directory, which for a
// fresh snapshot is empty or holds runc's mount stubs: about 9 µs empty,
// 70 µs for eight entries, warm (gate.BenchmarkTakeBaseline); measured in
// the shim (Create's log: baseline_ms, baseline_entries) on the 2-vCPU
// VM, 31 `ctr run --rm` of the test image: 4 entries, median 0.17 ms
// (max 1.3 ms) inside boundary_ms (median 9.5 ms) of a 245 ms run. Kept
// in memory, never written (only this shim's gate reads it). The bind
// layout needs none: its ctime rule already leaves out what predates the
// start.
func (op *operation) takeBaseline(ctx context.Context) error {
	if op.diff.Problem != "" || op.diff.Upper == "" {
		return nil
	}
	t := time.Now()
	b, err := gate.TakeBaseline(ctx, op.diff.Upper)
	op.baselineDur = time.Since(t)
	if errors.Is(err, gate.ErrBaselineTooLarge) {
		return refuse("rootfs_reused", "%v", err)
	}
	if err != nil {
		return err
	}
	op.baseline = b
	return nil
}

// baselineEntries is how many entries the baseline holds (-1: none taken).
func (op *operation) baselineEntries() int {
	if op.baseline == nil {
		return -1
	}
	return len(op.baseline.Entries)
}
