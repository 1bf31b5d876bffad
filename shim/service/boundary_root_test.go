package service

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/monitor"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// The real boundary through the exit pipeline's network steps, in a netns
// of the test's: installed and read back, counters read while installed,
// removed explicitly (a shared netns outlives the container), and nothing
// left to read or remove after.
func TestRootNetBoundaryFinalize(t *testing.T) {
	roottest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := kerneltest.NewNetns(t)
	cg := kerneltest.NewCgroup(t)
	id, err := cgroup.ID(cg.Path)
	if err != nil {
		t.Fatal(err)
	}
	opID := kerneltest.RandHex(16)
	plan, err := netpolicy.NewPlanScoped(opID, spec.Network{Mode: spec.NetworkDenyAll},
		netpolicy.CgroupRef{ID: id, Level: cgroup.Level(cg.Path), Path: cg.Path}, netpolicy.ScopeCgroup)
	if err != nil {
		t.Fatal(err)
	}
	st := record.Store{Dir: t.TempDir()}
	if _, err := st.CreateOperation(opID, "test", "c1"); err != nil {
		t.Fatal(err)
	}
	mon, err := monitor.Open(monitor.Config{OperationID: opID, Store: st, DenyRule: spec.NetworkDenyAll, Ctx: ctx, Logger: log.L}, plan)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	b := &netBoundary{private: false, log: log.L}
	t.Cleanup(func() { b.close(context.Background()) })
	if err := b.install(ctx, f, plan, mon); err != nil {
		t.Fatalf("install: %v", err)
	}
	if tables, _ := netpolicy.List(ctx, ns.FD); !slices.Contains(tables, plan.Table) {
		t.Fatalf("table %s not installed: %v", plan.Table, tables)
	}
	p := &exitPipeline{network: b, log: log.L}
	var x exitFacts
	p.finalizeNetwork(ctx, &x)
	b.closeMonitor()
	if x.Counters == nil || x.CountErr != nil || x.Removed != removedDeleted {
		t.Fatalf("finalize: counters %v (%v), removed %q", x.Counters, x.CountErr, x.Removed)
	}
	if tables, _ := netpolicy.List(ctx, ns.FD); slices.Contains(tables, plan.Table) {
		t.Fatalf("table %s left after removal: %v", plan.Table, tables)
	}
	if _, ok, err := b.counters(ctx); ok || err != nil {
		t.Fatalf("counters after removal: ok %v err %v", ok, err)
	}
	if how := b.remove(ctx); how != removedDeleted {
		t.Fatalf("second remove: %q, want the first one's answer", how)
	}
}
