package gate

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// Benchmarks. `go test -bench . ./shim/gate/` runs the small ones below;
// the P3/P4 figures come from TestBenchReport, which hack/bench-gate.sh runs
// as `GENSEE_BENCH=1 go test -run TestBenchReport -v ./shim/gate/` (add
// GENSEE_ROOT_TESTS=1 as root for the overlay variant of P4). Data lives
// under /var/tmp and is removed afterwards.

// benchDir makes a scratch directory under /var/tmp (not tmpfs on these
// machines, like the real state directory).
func benchDir(tb testing.TB) string {
	dir, err := os.MkdirTemp("/var/tmp", "gensee-bench-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// writeRandom writes size pseudo-random bytes to path.
func writeRandom(tb testing.TB, path string, size int64) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	if _, err := io.CopyN(f, rng, size); err != nil {
		tb.Fatal(err)
	}
}

// rawSHA256 is the peer: plain io.Copy of the file into sha256 (which goes
// through (*os.File).WriteTo and 32 KiB reads).
func rawSHA256(tb testing.TB, path string) time.Duration {
	unix.Sync()
	t0 := time.Now()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		tb.Fatal(err)
	}
	h.Sum(nil)
	return time.Since(t0)
}

// gateOnce gates root (bind layout), timing only the gate and the sync of
// what it staged (SyncStaged, as the helper does). Staged output is
// removed at the end of the test, not in between: on ext4 without a journal
// (these VMs) inode allocation scans past recently deleted inodes, so
// deleting 100,000 files just before a run would slow the next one's
// creates. Dirty pages are synced before the clock starts.
func gateOnce(tb testing.TB, root string, start time.Time, p spec.Product) time.Duration {
	base := filepath.Dir(root)
	if s := os.Getenv("GENSEE_BENCH_STAGING"); s != "" {
		base = s
	}
	staging := filepath.Join(base, fmt.Sprintf("staged-%d", time.Now().UnixNano()))
	tb.Cleanup(func() { os.RemoveAll(staging) })
	unix.Sync()
	in := Input{RootDir: root, Workspace: "/ws", Products: []spec.Product{p}, StagingDir: staging, StartTime: start}
	t0 := time.Now()
	res, err := Run(context.Background(), in)
	if err == nil {
		err = SyncStaged(staging, res) // as the helper does before its result
	}
	d := time.Since(t0)
	if err != nil {
		tb.Fatal(err)
	}
	if res.Verdict != Pass {
		tb.Fatalf("bench gate failed: %+v", res.Products)
	}
	return d
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// The go-test benchmarks report the gate's own time (gateOnce excludes the
// sync and setup) as custom metrics.

func BenchmarkGateBlob64MiB(b *testing.B) {
	dir := benchDir(b)
	start := time.Now()
	writeRandom(b, filepath.Join(dir, "root/ws/blob"), 64<<20)
	var total time.Duration
	for b.Loop() {
		total += gateOnce(b, filepath.Join(dir, "root"), start, spec.Product{Class: spec.ClassBlob, Slot: "blob"})
	}
	b.ReportMetric(float64(64*b.N)/total.Seconds(), "MiB/s")
}

func BenchmarkRawSHA256File64MiB(b *testing.B) {
	dir := benchDir(b)
	writeRandom(b, filepath.Join(dir, "blob"), 64<<20)
	var total time.Duration
	for b.Loop() {
		total += rawSHA256(b, filepath.Join(dir, "blob"))
	}
	b.ReportMetric(float64(64*b.N)/total.Seconds(), "MiB/s")
}

func BenchmarkGateTree10k(b *testing.B) {
	dir := benchDir(b)
	start := time.Now()
	makeTree(b, filepath.Join(dir, "root/ws/tree"), 10_000)
	var total time.Duration
	for b.Loop() {
		total += gateOnce(b, filepath.Join(dir, "root"), start, spec.Product{Class: spec.ClassDirectoryTree, Slot: "tree", MaxEntries: 20_000})
	}
	b.ReportMetric(float64(10_010*b.N)/total.Seconds(), "entries/s")
}

// makeTree writes n 100-byte files, 1,000 per directory.
func makeTree(tb testing.TB, dir string, n int) {
	buf := make([]byte, 100)
	for i := range n {
		if i%1000 == 0 {
			if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%03d", i/1000)), 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		buf[0] = byte(i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("d%03d/f%05d", i/1000, i)), buf, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
