package nflog

// Root-test harness: a kerneltest sandbox (fresh network namespace, test
// cgroup; clients started inside both) with a gensee table bound to the
// cgroup. Everything is removed at cleanup, pass or fail.

import (
	"context"
	"testing"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// env is one sandbox and its table.
type env struct {
	*kerneltest.Sandbox
	plan *netpolicy.Plan
}

func newEnv(t *testing.T, n spec.Network) *env {
	t.Helper()
	e := &env{Sandbox: kerneltest.NewSandbox(t)}
	id, err := e.CG.H.ID(e.CG.Path)
	if err != nil {
		t.Fatal(err)
	}
	e.plan, err = netpolicy.NewPlan("t"+kerneltest.RandHex(8), n, netpolicy.CgroupRef{Path: e.CG.Path, ID: id, Level: cgroup.Level(e.CG.Path)})
	if err != nil {
		t.Fatal(err)
	}
	if err := netpolicy.Apply(context.Background(), e.NS.FD, e.plan); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netpolicy.Remove(context.Background(), e.NS.FD, e.plan.Table); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return e
}
