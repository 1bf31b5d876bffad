package gate

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCopyUpCompare prints what the copy-up compare costs at its
// worst: every image file copied up with its metadata intact (chown -R to
// the same owner), so every one is read on both sides. As root:
//
//	GENSEE_ROOT_TESTS=1 go test ./shim/gate -run '^$' -bench '^BenchmarkCopyUpCompare$' -benchtime 1x
func BenchmarkCopyUpCompare(b *testing.B) {
	const files, bigSize = 10_000, 256 << 20
	o := mountOverlay(b, hardened, func(t testing.TB, d string) {
		makeTree(t, filepath.Join(d, "usr/small"), files)
		writeRandom(t, filepath.Join(d, "usr/big"), bigSize)
	})
	must(b, filepath.Walk(o.m("usr"), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 0, 0)
	}))
	var ds []time.Duration
	for range 3 {
		t0 := time.Now()
		res := runGate(b, o.input(b))
		ds = append(ds, time.Since(t0))
		if res.Verdict != Pass || res.Unclaimed.Count != 0 {
			b.Fatalf("copy-ups counted: %+v %+v", res.Unclaimed, res.Anomalies)
		}
	}
	mib := float64(files*100+bigSize) / (1 << 20)
	fmt.Printf("copy-up compare: %d small + one %d MiB same-metadata copy-ups gated in %v (median of 3): %.0f MiB/s of upper bytes compared, both sides read (load average %s)\n",
		files, bigSize>>20, median(ds), mib/median(ds).Seconds(), loadavg())
}
