package engine

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
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/telemetry"
	"github.com/gensee/gensee/spec"
)

// The real boundary, bound through Bind and ended through the exit path's network steps, in a netns
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
	st := record.Store{Dir: t.TempDir()}
	if _, err := st.CreateOperation(opID, "test", "c1"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(ns.Path)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBoundary(spec.NetnsPath, log.L)
	t.Cleanup(func() { b.Close(context.Background()) })
	plan, err := b.Bind(ctx, BindSpec{OperationID: opID, Network: spec.Network{Mode: spec.NetworkDenyAll}, Netns: f,
		Cgroup:  netpolicy.CgroupRef{ID: id, Level: cgroup.Level(cg.Path), Path: cg.Path},
		Monitor: telemetry.Config{OperationID: opID, Store: st, Ctx: ctx, Logger: log.L}})
	if err != nil {
		t.Fatalf("bind: %v", err)
	}
	if tables, _ := netpolicy.List(ctx, ns.FD); !slices.Contains(tables, plan.Table) {
		t.Fatalf("table %s not installed: %v", plan.Table, tables)
	}
	p := &Finish{Network: b, Log: log.L}
	var x Facts
	p.finishNetwork(ctx, &x)
	b.CloseMonitor()
	if x.Counters == nil || x.CountErr != nil || x.Removed != spec.TableDeleted {
		t.Fatalf("finalize: counters %v (%v), removed %q", x.Counters, x.CountErr, x.Removed)
	}
	if tables, _ := netpolicy.List(ctx, ns.FD); slices.Contains(tables, plan.Table) {
		t.Fatalf("table %s left after removal: %v", plan.Table, tables)
	}
	if _, ok, err := b.Counters(ctx); ok || err != nil {
		t.Fatalf("counters after removal: ok %v err %v", ok, err)
	}
	if how := b.Remove(ctx); how != spec.TableDeleted {
		t.Fatalf("second remove: %q, want the first one's answer", how)
	}
}
