package netpolicy

import (
	"context"
	"slices"
	"testing"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// TestRootHeldRelease: with releases held, Remove deletes the table at
// once and keeps the socket that deleted it for Held (one per removal),
// and Held hands them over only once.
func TestRootHeldRelease(t *testing.T) {
	roottest.Require(t)
	n := kerneltest.NewNetns(t)
	held.mu.Lock()
	saved := held.hold
	held.hold = true
	held.mu.Unlock()
	t.Cleanup(func() {
		held.mu.Lock()
		held.hold = saved
		held.mu.Unlock()
		for _, f := range Held() {
			f.Close()
		}
	})
	p, err := NewPlan("op-held-"+kerneltest.RandHex(4), spec.Network{Mode: spec.NetworkDenyAll}, CgroupRef{ID: 1, Level: 1, Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := Apply(ctx, n.FD, p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := Remove(context.Background(), n.FD, p.Table); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if left, err := List(ctx, n.FD); err != nil || slices.Contains(left, p.Table) {
		t.Fatalf("%s still listed after Remove (tables %v, %v)", p.Table, left, err)
	}
	fs := Held()
	if len(fs) != 1 {
		t.Fatalf("Held() = %d sockets, want the one that deleted the table", len(fs))
	}
	for _, f := range fs {
		f.Close()
	}
	if again := Held(); len(again) != 0 {
		t.Fatalf("Held() handed over %d sockets twice", len(again))
	}
}
