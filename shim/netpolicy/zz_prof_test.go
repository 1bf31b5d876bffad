package netpolicy

import (
	"testing"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
)

func TestZZProf(t *testing.T) {
	h, _ := cgroup.Find()
	id, _ := h.ID("/")
	ref := CgroupRef{Path: "/bench", ID: id, Level: 1}
	nw := p2Network(10000)
	for i := 0; i < 3; i++ {
		ns := newNetns(t)
		t0 := time.Now()
		p, _ := NewPlan("prof-"+randHex(3), nw, ref)
		t1 := time.Now()
		rs := build(p)
		t2 := time.Now()
		k, _ := newNetlinkKernel(ns.fd)
		if err := k.install(rs); err != nil {
			t.Fatal(err)
		}
		t3 := time.Now()
		flushConntrack(ns.fd)
		t4 := time.Now()
		got, err := k.dump(p.Table)
		if err != nil {
			t.Fatal(err)
		}
		t5 := time.Now()
		d := diff(build(p), got)
		t6 := time.Now()
		t.Logf("plan %v build %v install %v ct %v dump %v diff %v (%d)", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4), t6.Sub(t5), len(d))
	}
}
