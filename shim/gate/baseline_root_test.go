package gate

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// TestOverlayBaseline: on a real overlay, what the engine wrote through
// the merged view before the start (podman's /etc/mtab, a copy-up of an
// image file, a planted product) is excluded while unchanged; the
// workload's ln -sf over /etc/mtab, its write into a copied-up file and
// its rewrite of the planted product are its own.
func TestOverlayBaseline(t *testing.T) {
	o := mountOverlay(t, hardened, func(t testing.TB, d string) {
		writeFile(t, d, "etc/passwd", "root:x:0:0", 0o644)
		writeFile(t, d, "etc/group", "root:x:0:", 0o644)
		mkdirAll(t, d, "ws/out")
	})
	must(t, os.Symlink("/proc/mounts", o.m("etc/mtab")))
	must(t, os.Chmod(o.m("etc/group"), 0o600)) // copied up
	writeFile(t, o.merged, "ws/out/result.json", `{"planted":true}`, 0o644)
	b, err := TakeBaseline(context.Background(), o.upper)
	must(t, err)
	time.Sleep(FreshSlack + 10*time.Millisecond)
	in := o.input(t, spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"})
	in.Baseline = b

	res := runGate(t, in)
	requireRule(t, res, "out/result.json", RulePartial)
	if res.Unclaimed.Count != 0 || res.Excluded.Baseline != 4 { // etc, etc/mtab, etc/group, ws/out/result.json
		t.Fatalf("before the workload: unclaimed %+v, excluded %+v", res.Unclaimed, res.Excluded)
	}

	must(t, os.Remove(o.m("etc/mtab")))
	must(t, os.Symlink("/proc/self/mounts", o.m("etc/mtab")))
	must(t, os.WriteFile(o.m("etc/group"), []byte("root:x:0:\n"), 0o600))
	must(t, os.WriteFile(o.m("ws/out/result.json"), []byte(`{"ok":true}`), 0o644))
	in.StagingDir = t.TempDir() + "/staged"
	res = runGate(t, in)
	requirePass(t, res, "out/result.json")
	if got := strings.Join(res.Unclaimed.Sample, ","); got != "/etc/group,/etc/mtab" {
		t.Fatalf("after the workload: unclaimed %+v (excluded %+v)", res.Unclaimed, res.Excluded)
	}
}
