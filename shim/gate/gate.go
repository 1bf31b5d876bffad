package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/gensee/gensee/shim/walk"
)

// runEnv is the kernel-facing state of one run.
type runEnv struct {
	ctx   context.Context
	tree  *walk.Tree
	stage *stager
	buf   []byte // copy buffer for small files; the walk is single-threaded
	cmp   []byte // copy-up compare buffers (two halves), see compareBufs
}

// Run gates one task's rootfs diff. It returns an error only when the gate
// itself could not run (bad input, unreadable root, staging failure,
// cancellation); the caller then records a failed gate. In that case nothing
// is left staged. Otherwise the Result carries the verdict: pass only when
// every product passed and no anomaly was seen. Run never promotes.
//
// The tree must be quiescent (every process of the container gone); the
// gate detects, but cannot prevent, changes made while it reads.
func Run(ctx context.Context, in Input) (res *Result, retErr error) {
	g, err := newGater(in)
	if err != nil {
		return nil, err
	}
	opts := g.walkOpts
	opts.MaxNames = g.scanEntries
	tree, err := walk.Open(g.root, opts)
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	defer tree.Close()
	st := newStager(g.stagingDir)
	defer st.close()
	g.env = &runEnv{ctx: ctx, tree: tree, stage: st, buf: make([]byte, 64<<10)}
	defer func() {
		if retErr != nil {
			for _, h := range g.handlers {
				h.abort(g)
			}
		}
	}()
	for _, h := range g.handlers {
		if h.base().valid {
			if err := h.begin(g); err != nil {
				return nil, fmt.Errorf("gate: %w", err)
			}
		}
	}
	if err := g.walk(ctx); err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	for _, h := range g.handlers {
		if err := h.finish(g); err != nil {
			return nil, fmt.Errorf("gate: %w", err)
		}
	}
	g.finishUnclaimed()
	g.res.Verdict = Pass
	if len(g.res.Anomalies) > 0 {
		g.res.Verdict = Fail
	}
	for _, h := range g.handlers {
		pr := h.base().res
		if pr.Verdict != Pass {
			g.res.Verdict = Fail
		}
		g.res.Products = append(g.res.Products, *pr)
	}
	if g.res.Products == nil {
		g.res.Products = []ProductResult{}
	}
	return g.res, nil
}

// walk runs the scan. Reaching a scan cap is not an error: it is an anomaly,
// and no product can pass a scan that did not finish.
func (g *gater) walk(ctx context.Context) error {
	err := g.env.tree.Walk(ctx, g.visit)
	var le *walk.LimitError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errScanStopped):
	case errors.As(err, &le):
		g.anomaly(RuleOverMaxEntries, le.Path, fmt.Sprintf("more than %d directory entries in the rootfs diff", le.Limit))
	default:
		return err
	}
	for _, h := range g.handlers {
		if b := h.base(); b.valid {
			b.violate(RuleIncompleteScan, b.slot, "the scan stopped at a cap before the whole diff was read")
			b.resolved = true
		}
	}
	return nil
}
