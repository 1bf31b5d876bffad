// Package tabletest adds a gensee network table to a kerneltest sandbox,
// for root tests of the packages that read what the table does (NFLOG,
// watchdog sensors). It lives apart from kerneltest because it imports
// shim/netpolicy, whose own tests import kerneltest. Only imported from
// _test.go files; the table is removed at cleanup, pass or fail.
package tabletest

import (
	"context"
	"testing"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// Env is one sandbox (fresh netns, test cgroup) and the table bound to its
// cgroup.
type Env struct {
	*kerneltest.Sandbox
	Plan *netpolicy.Plan
}

// New makes a sandbox and applies network n to its cgroup.
func New(t testing.TB, n spec.Network) *Env {
	t.Helper()
	e := &Env{Sandbox: kerneltest.NewSandbox(t)}
	id, err := e.CG.H.ID(e.CG.Path)
	if err != nil {
		t.Fatal(err)
	}
	e.Plan, err = netpolicy.NewPlan("t"+kerneltest.RandHex(8), n, netpolicy.CgroupRef{Path: e.CG.Path, ID: id, Level: cgroup.Level(e.CG.Path)})
	if err != nil {
		t.Fatal(err)
	}
	if err := netpolicy.Apply(context.Background(), e.NS.FD, e.Plan); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netpolicy.Remove(context.Background(), e.NS.FD, e.Plan.Table); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return e
}
