package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables/expr"
)

// Install puts plan p's table into the network namespace netnsFD refers to
// (netnsFD < 0: the caller's own namespace) in one netlink batch, then, in a
// namespace other than the caller's, flushes conntrack. If the flush fails
// the table is removed again. Callers then call ReadBack, or use Apply.
func Install(ctx context.Context, netnsFD int, p *Plan) error {
	e, err := newEngine(netnsFD)
	if err != nil {
		return fmt.Errorf("install table %s: %w", tableOf(p), err)
	}
	return e.install(ctx, p)
}

// ReadBack lists the table's chains, rules, sets, set elements and counters
// and compares them to plan p. Any difference is a *DriftError naming what
// differs.
func ReadBack(ctx context.Context, netnsFD int, p *Plan) error {
	_, err := ReadBackAt(ctx, netnsFD, p)
	return err
}

// ReadBackAt is ReadBack, and says at which generation of the namespace's
// nf_tables the table matched its plan (OK is false when a commit happened
// while it read, or the kernel did not say). What that is worth, and what
// not, gen.go says.
func ReadBackAt(ctx context.Context, netnsFD int, p *Plan) (Matched, error) {
	e, err := newEngine(netnsFD)
	if err != nil {
		return Matched{}, fmt.Errorf("read back table %s: %w", tableOf(p), err)
	}
	return e.readBack(ctx, p)
}

// Matched is the generation a read-back found the table equal to its plan
// at; OK is false when it is not known (gen.go).
type Matched struct {
	Gen uint32
	OK  bool
}

// Apply is Install then ReadBack; if the read-back differs or fails, the
// table is removed and the error says why. Run it before any code of the
// image runs: only a table that read back equal to its plan is a boundary.
func Apply(ctx context.Context, netnsFD int, p *Plan) error {
	_, err := ApplyAt(ctx, netnsFD, p, nil)
	return err
}

// ApplyAt is Apply, and says at which generation the read-back matched.
// installed, when set, is called once the table is committed and before
// it is read back: a watcher that subscribes to ruleset changes there
// sees every commit after the read-back, so the read-back can stand for
// its first check (evidence.TableWatcher.Seed), and never the install's
// own.
func ApplyAt(ctx context.Context, netnsFD int, p *Plan, installed func()) (Matched, error) {
	e, err := newEngine(netnsFD)
	if err != nil {
		return Matched{}, fmt.Errorf("apply table %s: %w", tableOf(p), err)
	}
	return e.apply(ctx, p, installed)
}

// Remove deletes table name from the namespace. An absent table is not an
// error. It refuses names that are not gensee tables.
func Remove(ctx context.Context, netnsFD int, name string) error {
	if err := checkTable(name); err != nil {
		return fmt.Errorf("remove table: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("remove table %s: %w", name, err)
	}
	k, err := newNetlinkKernel(netnsFD)
	if err != nil {
		return fmt.Errorf("remove table %s: %w", name, err)
	}
	if err := k.remove(name); err != nil {
		return fmt.Errorf("remove table %s: %w", name, err)
	}
	return nil
}

// RemoveIfPresent deletes table name from the netns netnsFD refers to when
// it is there, and does nothing when it is not (a cleanup that may run
// after the table went with its netns, or twice).
func RemoveIfPresent(ctx context.Context, netnsFD int, name string) error {
	names, err := List(ctx, netnsFD)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	if !slices.Contains(names, name) {
		return nil
	}
	return Remove(ctx, netnsFD, name)
}

// List returns the names of the gensee tables (inet gensee_*) in the
// namespace, for cleanup and leak checks.
func List(ctx context.Context, netnsFD int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list gensee tables: %w", err)
	}
	k, err := newNetlinkKernel(netnsFD)
	if err != nil {
		return nil, fmt.Errorf("list gensee tables: %w", err)
	}
	names, err := k.tables()
	if err != nil {
		return nil, fmt.Errorf("list gensee tables: %w", err)
	}
	return names, nil
}

// RuleExprs returns the expressions of each rule of gensee table name, one
// slice a rule, rendered as ReadBack compares them (CanonExpr). They come
// from a raw NFT_MSG_GETRULE dump: google/nftables v0.3.0 silently drops
// the expressions it cannot decode, `socket` among them, when it reads
// rules back. It refuses names that are not gensee tables.
func RuleExprs(ctx context.Context, netnsFD int, name string) ([][]string, error) {
	if err := checkTable(name); err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read rules of %s: %w", name, err)
	}
	k, err := newNetlinkKernel(netnsFD)
	if err != nil {
		return nil, fmt.Errorf("read rules of %s: %w", name, err)
	}
	nl, err := k.rawConn()
	if err != nil {
		return nil, fmt.Errorf("read rules of %s: %w", name, err)
	}
	defer nl.Close()
	rules, err := dumpRules(nl, name)
	if err != nil {
		return nil, fmt.Errorf("read rules of %s: %w", name, err)
	}
	out := make([][]string, len(rules))
	for i, r := range rules {
		out[i] = r.exprs
	}
	return out, nil
}

// CanonExpr renders e as RuleExprs does, leaving out what the kernel does
// not echo and what changes at run time.
func CanonExpr(e expr.Any) string { return canon(e) }

func tableOf(p *Plan) string {
	if p == nil {
		return "<nil plan>"
	}
	return p.Table
}

// engine runs the plan against one kernel. flushCT is nil when conntrack
// must not be flushed (the caller's own namespace).
type engine struct {
	k       kernel
	flushCT func() error
}

func newEngine(netnsFD int) (engine, error) {
	k, err := newNetlinkKernel(netnsFD)
	if err != nil {
		return engine{}, err
	}
	e := engine{k: k}
	if netnsFD > 0 {
		own, err := SameNetns(netnsFD)
		if err != nil {
			return engine{}, err
		}
		if !own {
			e.flushCT = func() error { return flushConntrack(netnsFD) }
		}
	}
	return e, nil
}

func (e engine) install(ctx context.Context, p *Plan) error {
	if err := p.check(); err != nil {
		return fmt.Errorf("install table %s: %w", tableOf(p), err)
	}
	return e.installRS(ctx, p, build(p))
}

func (e engine) installRS(ctx context.Context, p *Plan, rs *ruleset) (retErr error) {
	if err := e.installTable(ctx, p, rs); err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			if err := e.k.remove(p.Table); err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("roll back table %s: %w", p.Table, err))
			}
		}
	}()
	return e.flush(p)
}

// installTable sends the table's batch.
func (e engine) installTable(ctx context.Context, p *Plan, rs *ruleset) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("install table %s: %w", p.Table, err)
	}
	if err := e.k.install(rs); err != nil {
		// The batch is atomic: nothing of ours is in the kernel. The
		// table may be someone else's (EEXIST), so never delete here.
		return fmt.Errorf("install table %s: %w", p.Table, err)
	}
	return nil
}

// flush ends the namespace's conntrack entries once the table is in: a
// flow from before it gets no reply-direction pass.
func (e engine) flush(p *Plan) error {
	if e.flushCT == nil {
		return nil
	}
	if err := e.flushCT(); err != nil {
		return fmt.Errorf("install table %s: %w", p.Table, err)
	}
	return nil
}

func (e engine) readBack(ctx context.Context, p *Plan) (Matched, error) {
	if err := p.check(); err != nil {
		return Matched{}, fmt.Errorf("read back table %s: %w", tableOf(p), err)
	}
	return e.readBackRS(ctx, p, build(p))
}

func (e engine) readBackRS(ctx context.Context, p *Plan, want *ruleset) (Matched, error) {
	if err := ctx.Err(); err != nil {
		return Matched{}, fmt.Errorf("read back table %s: %w", p.Table, err)
	}
	got, err := e.k.dump(p.Table)
	if errors.Is(err, errNoTable) {
		return Matched{}, &DriftError{Table: p.Table, Diffs: []string{"table inet " + p.Table + " is missing"}}
	}
	if err != nil {
		return Matched{}, fmt.Errorf("read back table %s: %w", p.Table, err)
	}
	if d := diff(want, got); len(d) > 0 {
		return Matched{}, &DriftError{Table: p.Table, Diffs: d}
	}
	return Matched{Gen: got.gen, OK: got.genOK}, nil
}

func (e engine) apply(ctx context.Context, p *Plan, installed func()) (Matched, error) {
	if err := p.check(); err != nil {
		return Matched{}, fmt.Errorf("apply table %s: %w", tableOf(p), err)
	}
	rs := build(p)
	// Index the planned set elements on the other core while the
	// kernel works through the batch.
	prepared := make(chan struct{})
	go func() { rs.prepare(); close(prepared) }()
	err := e.installTable(ctx, p, rs)
	<-prepared
	if err != nil {
		return Matched{}, err
	}
	if installed != nil {
		installed()
	}
	// The conntrack flush (after the install, as Install does it) and the
	// read-back touch different netlink subsystems: side by side. Either
	// failing removes the table.
	flushed := make(chan error, 1)
	go func() { flushed <- e.flush(p) }()
	m, err := e.readBackRS(ctx, p, rs)
	if ferr := <-flushed; ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		if rerr := e.k.remove(p.Table); rerr != nil {
			return Matched{}, errors.Join(fmt.Errorf("apply table %s: %w", p.Table, err), fmt.Errorf("roll back table %s: %w", p.Table, rerr))
		}
		return Matched{}, fmt.Errorf("apply table %s (rolled back): %w", p.Table, err)
	}
	return m, nil
}
