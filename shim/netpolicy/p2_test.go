package netpolicy

// P2: installing a 10,000-tuple allow_exact policy with Apply (plan, one
// netlink batch, conntrack flush, full read-back) against `nft -f` of the
// equivalent ruleset text, each into a fresh namespace, alternating which
// goes first. Run by hack/bench-p2.sh:
//
//	GENSEE_ROOT_TESTS=1 go test ./shim/netpolicy -run '^$' -bench '^BenchmarkP2Report$' -benchtime 1x [-args -p2.tuples N -p2.rounds R]

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/spec"
)

var (
	p2Tuples = flag.Int("p2.tuples", 10000, "P2: allow_exact tuples to install")
	p2Rounds = flag.Int("p2.rounds", 7, "P2: rounds (median reported)")
)

// p2Network is n distinct IPv4 tcp/udp tuples in TEST-NET-1.
func p2Network(n int) spec.Network {
	nw := spec.Network{Mode: spec.NetworkAllowExact}
	for i := 0; i < n; i++ {
		proto := "tcp"
		if i%2 == 1 {
			proto = "udp"
		}
		nw.Allow = append(nw.Allow, spec.AllowRule{IP: fmt.Sprintf("192.0.2.%d", 1+i%250), Proto: proto, Port: 1024 + i/250})
	}
	return nw
}

// nftScript renders the table build(p) makes as nft(8) input. Only the
// shapes P2 uses (IPv4 tcp/udp tuples) are supported. cgPath is the cgroup
// as nft resolves it, relative to /sys/fs/cgroup.
func nftScript(p *Plan, cgPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n\tcounter allowed { }\n\tcounter denied { }\n\tcounter denied_kernel { }\n", p.Table)
	fmt.Fprintf(&b, "\tset cg { type cgroupsv2; size 1; elements = { %q } }\n", cgPath)
	fmt.Fprintf(&b, "\tset allow4 { type ipv4_addr . inet_proto . inet_service; size %d; counter; elements = {\n", len(p.Allow))
	for i, t := range p.Allow {
		sep := ",\n"
		if i == len(p.Allow)-1 {
			sep = "\n"
		}
		fmt.Fprintf(&b, "\t\t%s . %s . %d%s", t.Addr, ProtoName(t.Proto), t.Port, sep)
	}
	b.WriteString("\t} }\n")
	cg := fmt.Sprintf("socket cgroupv2 level %d @cg", p.Cgroup.Level)
	fmt.Fprintf(&b, "\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n")
	fmt.Fprintf(&b, "\t\t%s meta nfproto ipv4 ip daddr . meta l4proto . th dport @allow4 counter name \"allowed\" accept comment \"gensee: allowed ipv4 tuples\"\n", cg)
	fmt.Fprintf(&b, "\t\t%s ct direction reply meta nfproto ipv4 ip saddr . meta l4proto . th sport @allow4 counter name \"allowed\" accept comment \"gensee: replies from allowed ipv4 tuples\"\n", cg)
	fmt.Fprintf(&b, "\t\t%s meta skuid >= 0 limit rate %d/second burst %d packets log prefix %q group %d comment \"gensee: log denied\"\n", cg, logRate, logBurst, p.LogPrefix, p.LogGroup)
	fmt.Fprintf(&b, "\t\t%s meta skuid >= 0 counter name \"denied\" drop comment \"gensee: deny\"\n", cg)
	fmt.Fprintf(&b, "\t\t%s counter name \"denied_kernel\" drop comment \"gensee: deny, no owning process\"\n\t}\n}\n", cg)
	return b.String()
}

type p2Result struct {
	gensee, nft []time.Duration
	ratios      []float64
}

func median[T int64 | float64](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func durMS(d []time.Duration) float64 {
	ms := make([]float64, len(d))
	for i, x := range d {
		ms[i] = float64(x.Microseconds()) / 1000
	}
	return median(ms)
}

func (r p2Result) String() string {
	return fmt.Sprintf("gensee %.1f ms, nft -f %.1f ms, ratio %.2f", durMS(r.gensee), durMS(r.nft), median(r.ratios))
}

// measureP2 runs the comparison; it verifies once that the nft text loads a
// table ReadBack finds equal to the plan, so both sides install the same.
func measureP2(t testing.TB, tuples, rounds int) p2Result {
	cg := kerneltest.NewCgroup(t)
	h, cgp := cg.H, cg.Path
	id, err := h.ID(cgp)
	if err != nil {
		t.Fatal(err)
	}
	ref := CgroupRef{Path: cgp, ID: id, Level: cgroup.Level(cgp)}
	rel, err := filepath.Rel("/sys/fs/cgroup", h.Mountpoint)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("nft resolves cgroup paths under /sys/fs/cgroup; cgroup2 is at %s", h.Mountpoint)
	}
	nw := p2Network(tuples)
	opID := "p2-" + kerneltest.RandHex(4)
	p, err := NewPlan(opID, nw, ref)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "p2.nft")
	if err := os.WriteFile(script, []byte(nftScript(p, filepath.Join(rel, cgp))), 0o600); err != nil {
		t.Fatal(err)
	}
	nftBin, err := exec.LookPath("nft")
	if err != nil {
		t.Fatalf("nft(8) not found: apt-get install nftables")
	}

	ctx := context.Background()
	runGensee := func() time.Duration {
		ns := kerneltest.NewNetns(t)
		start := time.Now()
		p, err := NewPlan(opID, nw, ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := Apply(ctx, ns.FD, p); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		return time.Since(start)
	}
	runNft := func(verify bool) time.Duration {
		ns := kerneltest.NewNetns(t)
		var d time.Duration
		err := ns.Do(func() error {
			cmd := exec.Command(nftBin, "-f", script)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			d = time.Since(start)
			if err != nil {
				return fmt.Errorf("nft -f: %v: %s", err, out)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if verify {
			if err := ReadBack(ctx, ns.FD, p); err != nil {
				t.Fatalf("the nft script does not load the planned table: %v", err)
			}
		}
		return d
	}

	var r p2Result
	runNft(true) // warm up both paths (page cache, nft's libraries) and check equivalence
	runGensee()
	for i := 0; i < rounds; i++ {
		var g, n time.Duration
		if i%2 == 0 {
			g, n = runGensee(), runNft(false)
		} else {
			n, g = runNft(false), runGensee()
		}
		r.gensee = append(r.gensee, g)
		r.nft = append(r.nft, n)
		r.ratios = append(r.ratios, float64(g)/float64(n))
		t.Logf("round %d: gensee %v, nft -f %v", i+1, g.Round(time.Microsecond), n.Round(time.Microsecond))
	}
	return r
}

// BenchmarkP2Report is the P2 comparison, run once whatever b.N is:
//
//	go test ./shim/netpolicy -run '^$' -bench '^BenchmarkP2Report$' -benchtime 1x [-args -p2.tuples N -p2.rounds R]
//
// It is a benchmark, not a test, so plain `go test` never runs (or skips) it.
func BenchmarkP2Report(b *testing.B) {
	roottest.Require(b)
	r := measureP2(b, *p2Tuples, *p2Rounds)
	fmt.Printf("P2 install %d tuples: %s\n", *p2Tuples, r)
}

// BenchmarkApply10000 times Apply of a 10,000-tuple plan into a fresh
// namespace (namespace setup excluded).
func BenchmarkApply10000(b *testing.B) {
	roottest.Require(b)
	h, err := cgroup.Find()
	if err != nil {
		b.Fatal(err)
	}
	id, err := h.ID("/")
	if err != nil {
		b.Fatal(err)
	}
	// The root cgroup's id with level 1 matches nothing; install cost is the same.
	ref := CgroupRef{Path: "/bench", ID: id, Level: 1}
	nw := p2Network(10000)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns := kerneltest.NewNetns(b)
		b.StartTimer()
		p, err := NewPlan("bench-"+kerneltest.RandHex(3), nw, ref)
		if err != nil {
			b.Fatal(err)
		}
		if err := Apply(ctx, ns.FD, p); err != nil {
			b.Fatal(err)
		}
	}
}
