package netpolicy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// fakeKernel keeps at most one table; tamper runs after install.
type fakeKernel struct {
	installed  *ruleset
	installErr error
	tamper     func(*ruleset)
	removed    []string
}

func (f *fakeKernel) install(rs *ruleset) error {
	if f.installErr != nil {
		return f.installErr
	}
	f.installed = asDumped(rs)
	if f.tamper != nil {
		f.tamper(f.installed)
	}
	return nil
}

func (f *fakeKernel) dump(table string) (*ruleset, error) {
	if f.installed == nil || f.installed.table.Name != table {
		return nil, errNoTable
	}
	return f.installed, nil
}

// dumpCounters answers with the whole table: countersOf reads only what
// holds counters.
func (f *fakeKernel) dumpCounters(table string, _ []string) (*ruleset, error) { return f.dump(table) }

func (f *fakeKernel) remove(table string) error {
	f.removed = append(f.removed, table)
	f.installed = nil
	return nil
}

func TestApplyRollsBackOnDrift(t *testing.T) {
	p := exactPlan(t)
	f := &fakeKernel{tamper: func(rs *ruleset) { rs.rules = rs.rules[1:] }}
	_, err := engine{k: f}.apply(context.Background(), p, nil)
	var de *DriftError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("apply = %v, want a rolled-back DriftError", err)
	}
	if len(f.removed) != 1 || f.removed[0] != p.Table || f.installed != nil {
		t.Fatalf("removed %v, left %v", f.removed, f.installed)
	}
}

func TestApplyNeverRemovesWhatItDidNotInstall(t *testing.T) {
	p := exactPlan(t)
	f := &fakeKernel{installErr: unix.EEXIST}
	called := false
	_, err := engine{k: f}.apply(context.Background(), p, func() { called = true })
	if !errors.Is(err, unix.EEXIST) || len(f.removed) != 0 || called {
		t.Fatalf("apply = %v, removed %v, installed hook called %v; want EEXIST, nothing removed, no hook", err, f.removed, called)
	}
}

// TestApplyInstalledHook: the hook runs once the table is committed and
// before the read-back (a watcher subscribing there never hears the
// install's own commit, and hears every later one).
func TestApplyInstalledHook(t *testing.T) {
	p := exactPlan(t)
	f := &fakeKernel{}
	var sawTable bool
	_, err := engine{k: f}.apply(context.Background(), p, func() {
		sawTable = f.installed != nil
		f.tamper = nil
		f.installed.rules = f.installed.rules[1:] // a commit after the hook: the read-back must see it
	})
	var de *DriftError
	if !sawTable || !errors.As(err, &de) {
		t.Fatalf("hook saw the table %v; apply = %v, want the read-back to find the later change", sawTable, err)
	}
}

func TestInstallRollsBackWhenConntrackFlushFails(t *testing.T) {
	p := exactPlan(t)
	f := &fakeKernel{}
	e := engine{k: f, flushCT: func() error { return errors.New("boom") }}
	if err := e.install(context.Background(), p); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("install = %v", err)
	}
	if len(f.removed) != 1 {
		t.Fatalf("table not rolled back: removed %v", f.removed)
	}
}

func TestApplyOK(t *testing.T) {
	p := exactPlan(t)
	f := &fakeKernel{}
	flushed := 0
	e := engine{k: f, flushCT: func() error { flushed++; return nil }}
	if _, err := e.apply(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	if flushed != 1 || len(f.removed) != 0 {
		t.Fatalf("flushed %d, removed %v", flushed, f.removed)
	}
	f.installed.counters = []*nftables.CounterObj{{Name: "allowed", Packets: 1}, {Name: "denied", Packets: 2}, {Name: "denied_kernel"}, {Name: "spoofed"}, {Name: "source_routed"}}
	c, err := e.counters(context.Background(), p)
	if err != nil || c.Denied.Packets != 2 || c.Allowed.Packets != 1 {
		t.Fatalf("counters = %+v, %v", c, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.apply(ctx, p, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply with a done context = %v", err)
	}
}

func TestReadBackMissing(t *testing.T) {
	_, err := engine{k: &fakeKernel{}}.readBack(context.Background(), exactPlan(t))
	var de *DriftError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("readBack = %v", err)
	}
}

func TestSameNetns(t *testing.T) {
	fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no /proc/self/ns/net: %v", err)
	}
	defer unix.Close(fd)
	if same, err := SameNetns(fd); err != nil || !same {
		t.Fatalf("SameNetns(own) = %v, %v", same, err)
	}
	// The caller's own namespace is never conntrack-flushed.
	e, err := newEngine(fd)
	if err != nil || e.flushCT != nil {
		t.Fatalf("newEngine(own netns) = %+v, %v; want no conntrack flush", e, err)
	}
	if e, err := newEngine(-1); err != nil || e.flushCT != nil {
		t.Fatalf("newEngine(-1) = %+v, %v; want no conntrack flush", e, err)
	}
	if _, err := newEngine(0); err == nil {
		t.Fatal("newEngine(0): want refusal")
	}
}
