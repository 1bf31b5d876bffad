package netpolicy

import (
	"testing"

	"github.com/google/nftables"
)

func BenchmarkZZPlan(b *testing.B) {
	nw := p2Network(10000)
	for i := 0; i < b.N; i++ {
		NewPlan("prof", nw, testCG)
	}
}

func BenchmarkZZBuild(b *testing.B) {
	p, _ := NewPlan("prof", p2Network(10000), testCG)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		build(p)
	}
}

func BenchmarkZZMarshal(b *testing.B) {
	p, _ := NewPlan("prof", p2Network(10000), testCG)
	rs := build(p)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, _ := nftables.New()
		for _, s := range rs.sets {
			c.AddSet(s.set, nil)
			for j := 0; j < len(s.elems); j += maxElemsPerMsg {
				c.SetAddElements(s.set, s.elems[j:min(j+maxElemsPerMsg, len(s.elems))])
			}
		}
	}
}

func BenchmarkZZDiff(b *testing.B) {
	p, _ := NewPlan("prof", p2Network(10000), testCG)
	want := build(p)
	got := asDumped(want)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		diff(want, got)
	}
}
