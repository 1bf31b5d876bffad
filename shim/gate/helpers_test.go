package gate

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// writeFile creates dir/rel (and parents) with content and mode.
func writeFile(t testing.TB, dir, rel, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func mkdirAll(t testing.TB, dir, rel string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// bindInput gates root as a bind-layout rootfs with workspace /ws.
func bindInput(t testing.TB, root string, start time.Time, products ...spec.Product) Input {
	return Input{
		RootDir:    root,
		Workspace:  "/ws",
		Products:   products,
		StagingDir: filepath.Join(t.TempDir(), "staged"),
		StartTime:  start,
	}
}

// runGate runs the gate with a bound, failing the test on a hang or error.
func runGate(t testing.TB, in Input) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type out struct {
		res *Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		res, err := Run(ctx, in)
		ch <- out{res, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("Run: %v", o.err)
		}
		return o.res
	case <-time.After(90 * time.Second):
		t.Fatal("Run did not return: the gate hung")
	}
	return nil
}

func productOf(t testing.TB, res *Result, slot string) ProductResult {
	t.Helper()
	for _, p := range res.Products {
		if p.Slot == slot {
			return p
		}
	}
	t.Fatalf("no product %q in result", slot)
	return ProductResult{}
}

func requirePass(t testing.TB, res *Result, slot string) ProductResult {
	t.Helper()
	p := productOf(t, res, slot)
	if p.Verdict != Pass {
		t.Fatalf("product %s: verdict %s, violations %+v (anomalies %+v)", slot, p.Verdict, p.Violations, res.Anomalies)
	}
	if p.Staged == "" {
		t.Fatalf("product %s passed but was not staged", slot)
	}
	return p
}

// requireRule asserts that slot failed with rule and was not staged.
func requireRule(t testing.TB, res *Result, slot, rule string) ProductResult {
	t.Helper()
	p := productOf(t, res, slot)
	if p.Verdict != Fail {
		t.Fatalf("product %s: verdict %s, want fail with %s", slot, p.Verdict, rule)
	}
	if res.Verdict != Fail {
		t.Fatalf("overall verdict %s with a failing product", res.Verdict)
	}
	for _, v := range p.Violations {
		if v.Rule == rule {
			if p.Staged != "" {
				t.Fatalf("failing product %s still staged at %s", slot, p.Staged)
			}
			return p
		}
	}
	t.Fatalf("product %s: want rule %s, got %+v", slot, rule, p.Violations)
	return p
}

func hasAnomaly(res *Result, rule string) bool {
	for _, a := range res.Anomalies {
		if a.Rule == rule {
			return true
		}
	}
	return false
}

// stagedEmpty asserts the staging directory holds nothing.
func stagedEmpty(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("staging directory %s not empty: %v", dir, ents)
	}
}
