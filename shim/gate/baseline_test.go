package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// beforeStart takes the baseline of f's upper directory once pre has
// written into it (the engine's or the client's writes), then lets
// FreshSlack pass and returns the start: what follows is the workload.
func (f *fakeOverlay) beforeStart(t *testing.T, pre func(upper string)) (*Baseline, time.Time) {
	t.Helper()
	pre(f.upper)
	b, err := TakeBaseline(context.Background(), f.upper)
	if err != nil {
		t.Fatalf("TakeBaseline: %v", err)
	}
	time.Sleep(FreshSlack + 10*time.Millisecond)
	return b, time.Now()
}

// podmanMtab writes what podman leaves in an upperdir before the
// container starts: /etc copied up and the /etc/mtab symlink.
func podmanMtab(t *testing.T, upper string) {
	mkdirAll(t, upper, "etc")
	must(t, os.Symlink("/proc/mounts", filepath.Join(upper, "etc/mtab")))
}

// TestBaselineExcluded: what was in the upper directory before the start
// and is still as it was is not the workload's: no unclaimed change, so
// unclaimed "fail" passes; it is counted in excluded.baseline. Without
// the baseline the same tree fails.
func TestBaselineExcluded(t *testing.T) {
	result := spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"}
	for _, withBaseline := range []bool{true, false} {
		t.Run(fmt.Sprintf("baseline=%v", withBaseline), func(t *testing.T) {
			f := newFakeOverlay(t)
			mkdirAll(t, f.lower, "etc")
			b, start := f.beforeStart(t, func(upper string) {
				podmanMtab(t, upper)
				writeFile(t, upper, "ws/stray", "left by an earlier run", 0o644)
			})
			writeFile(t, f.upper, "ws/out/result.json", `{"ok":true}`, 0o644)
			in := f.input(t, result)
			in.StartTime, in.FailUnclaimed = start, true
			if withBaseline {
				in.Baseline = b
			}
			res := runGate(t, in)
			requirePass(t, res, "out/result.json")
			if !withBaseline {
				if res.Verdict != Fail || res.Unclaimed.Count != 2 || strings.Join(res.Unclaimed.Sample, ",") != "/etc/mtab,/ws/stray" {
					t.Fatalf("without a baseline: verdict %s, unclaimed %+v", res.Verdict, res.Unclaimed)
				}
				return
			}
			if res.Verdict != Pass || res.Unclaimed.Count != 0 || len(res.Anomalies) != 0 {
				t.Fatalf("verdict %s, unclaimed %+v, anomalies %+v", res.Verdict, res.Unclaimed, res.Anomalies)
			}
			// etc, etc/mtab, ws/stray; ws and ws/out are structural.
			if res.Excluded.Baseline != 3 {
				t.Fatalf("excluded %+v, want 3 baseline entries", res.Excluded)
			}
			if res.Unclaimed.Digest != digestLines(nil) {
				t.Fatalf("unclaimed digest %s is not the empty list's", res.Unclaimed.Digest)
			}
		})
	}
}

// TestBaselineChanged: any change to an entry of the baseline (content,
// metadata, times set back, a replacement, a rename, a link) makes it the
// workload's again; so does an entry written within FreshSlack of the
// start, which the clock cannot tell from a replacement made just after.
func TestBaselineChanged(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, upper string)
		late   bool     // the start follows the baseline at once
		want   []string // unclaimed
	}{
		{"unchanged", func(*testing.T, string) {}, false, nil},
		{"read", func(t *testing.T, upper string) {
			_, err := os.ReadFile(filepath.Join(upper, "ws/f"))
			must(t, err)
		}, false, nil},
		{"content", func(t *testing.T, upper string) {
			must(t, os.WriteFile(filepath.Join(upper, "ws/f"), []byte("v2"), 0o644))
		}, false, []string{"/ws/f"}},
		{"chmod and back", func(t *testing.T, upper string) {
			must(t, os.Chmod(filepath.Join(upper, "ws/f"), 0o600))
			must(t, os.Chmod(filepath.Join(upper, "ws/f"), 0o644))
		}, false, []string{"/ws/f"}},
		{"times set back", func(t *testing.T, upper string) {
			old := time.Now().Add(-time.Hour)
			must(t, os.Chtimes(filepath.Join(upper, "ws/f"), old, old))
		}, false, []string{"/ws/f"}},
		{"replaced", func(t *testing.T, upper string) {
			must(t, os.Remove(filepath.Join(upper, "ws/f")))
			writeFile(t, upper, "ws/f", "v1", 0o644)
		}, false, []string{"/ws/f"}},
		{"renamed away and back", func(t *testing.T, upper string) {
			must(t, os.Rename(filepath.Join(upper, "ws/f"), filepath.Join(upper, "ws/g")))
			must(t, os.Rename(filepath.Join(upper, "ws/g"), filepath.Join(upper, "ws/f")))
		}, false, []string{"/ws/f"}},
		{"hard link", func(t *testing.T, upper string) {
			must(t, os.Link(filepath.Join(upper, "ws/f"), filepath.Join(upper, "ws/g")))
		}, false, []string{"/ws/f", "/ws/g"}},
		{"mtab relinked", func(t *testing.T, upper string) { // ln -sf /proc/mounts /etc/mtab
			must(t, os.Remove(filepath.Join(upper, "etc/mtab")))
			must(t, os.Symlink("/proc/mounts", filepath.Join(upper, "etc/mtab")))
		}, false, []string{"/etc", "/etc/mtab"}},
		{"mtab made a file", func(t *testing.T, upper string) { // rm /etc/mtab; echo x > /etc/mtab
			must(t, os.Remove(filepath.Join(upper, "etc/mtab")))
			writeFile(t, upper, "etc/mtab", "x\n", 0o644)
		}, false, []string{"/etc", "/etc/mtab"}},
		{"written just before the start", func(*testing.T, string) {}, true, []string{"/etc", "/etc/mtab", "/ws/f"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeOverlay(t)
			pre := func(upper string) {
				podmanMtab(t, upper)
				writeFile(t, upper, "ws/f", "v1", 0o644)
			}
			var b *Baseline
			var start time.Time
			if tc.late {
				pre(f.upper)
				var err error
				b, err = TakeBaseline(context.Background(), f.upper)
				must(t, err)
				start = time.Now()
			} else {
				b, start = f.beforeStart(t, pre)
			}
			tc.change(t, f.upper)
			in := f.input(t)
			in.StartTime, in.Baseline = start, b
			res := runGate(t, in)
			if got := strings.Join(res.Unclaimed.Sample, ","); got != strings.Join(tc.want, ",") || res.Unclaimed.Count != int64(len(tc.want)) {
				t.Fatalf("unclaimed %+v, want %v", res.Unclaimed, tc.want)
			}
		})
	}
}

// TestBaselineProducts: a product slot that holds only what was there
// before the start is not the workload's product (partial, not staged);
// the same slot rewritten by the workload is. A directory slot made
// before the start passes once the workload wrote into it, and fails when
// it holds an entry from before the start.
func TestBaselineProducts(t *testing.T) {
	result := spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"}
	tree := spec.Product{Class: spec.ClassDirectoryTree, Slot: "out/site"}
	patch := spec.Product{Class: spec.ClassWorkspacePatch, Slot: "changes.jsonl"}
	cases := []struct {
		name    string
		product spec.Product
		pre     func(t *testing.T, upper string)
		task    func(t *testing.T, upper string)
		rule    string // "" passes
	}{
		{"planted result", result, func(t *testing.T, upper string) {
			writeFile(t, upper, "ws/out/result.json", `{"planted":true}`, 0o644)
		}, func(*testing.T, string) {}, RulePartial},
		{"planted result rewritten", result, func(t *testing.T, upper string) {
			writeFile(t, upper, "ws/out/result.json", `{"planted":true}`, 0o644)
		}, func(t *testing.T, upper string) {
			must(t, os.WriteFile(filepath.Join(upper, "ws/out/result.json"), []byte(`{"ok":true}`), 0o644))
		}, ""},
		{"empty tree made before", tree, func(t *testing.T, upper string) {
			mkdirAll(t, upper, "ws/out/site")
		}, func(*testing.T, string) {}, RulePartial},
		{"tree made before, written into", tree, func(t *testing.T, upper string) {
			mkdirAll(t, upper, "ws/out/site/sub")
		}, func(t *testing.T, upper string) {
			writeFile(t, upper, "ws/out/site/sub/index.html", "<p>", 0o644)
		}, ""},
		{"tree holding a planted file", tree, func(t *testing.T, upper string) {
			writeFile(t, upper, "ws/out/site/planted.js", "evil()", 0o644)
		}, func(t *testing.T, upper string) {
			writeFile(t, upper, "ws/out/site/index.html", "<p>", 0o644)
		}, RulePartial},
		{"patch leaves out what was there", patch, func(t *testing.T, upper string) {
			writeFile(t, upper, "ws/old", "before", 0o644)
		}, func(t *testing.T, upper string) {
			writeFile(t, upper, "ws/new", "task", 0o644)
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeOverlay(t)
			b, start := f.beforeStart(t, func(upper string) { tc.pre(t, upper) })
			tc.task(t, f.upper)
			in := f.input(t, tc.product)
			in.StartTime, in.Baseline = start, b
			res := runGate(t, in)
			if res.Unclaimed.Count != 0 {
				t.Errorf("unclaimed %+v", res.Unclaimed)
			}
			if tc.rule != "" {
				requireRule(t, res, tc.product.Slot, tc.rule)
				stagedEmpty(t, in.StagingDir)
				return
			}
			p := requirePass(t, res, tc.product.Slot)
			if tc.product.Class == spec.ClassWorkspacePatch {
				lines := readPatch(t, p.Staged)
				if _, ok := lines["old"]; ok || lines["new"] != "task" {
					t.Fatalf("patch lines %q: want new only", lines)
				}
			}
		})
	}
}

// TestBaselineBound: a baseline holds at most MaxBaselineEntries entries
// and MaxBaselinePathBytes of paths; more is ErrBaselineTooLarge with a
// fix. A baseline is for the overlay
// layout only, and one larger than the bound is bad input.
func TestBaselineBound(t *testing.T) {
	upper := memDir(t)
	const dirs = 64
	for i := range MaxBaselineEntries - dirs {
		writeFile(t, upper, fmt.Sprintf("d%02d/f%05d", i%dirs, i), "", 0o644)
	}
	b, err := TakeBaseline(context.Background(), upper)
	if err != nil || len(b.Entries) != MaxBaselineEntries {
		t.Fatalf("%d entries: %v (%+v)", MaxBaselineEntries, err, b)
	}
	writeFile(t, upper, "d00/one-more", "", 0o644)
	_, err = TakeBaseline(context.Background(), upper)
	if !errors.Is(err, ErrBaselineTooLarge) || !strings.Contains(err.Error(), "fresh snapshot") {
		t.Fatalf("%d entries: %v, want ErrBaselineTooLarge with a fix", MaxBaselineEntries+1, err)
	}

	// 100 nested directories of 255-byte names: few entries, 1.3 MB of
	// paths (made fd-relative: the deep ones are past PATH_MAX).
	deep := memDir(t)
	fd, err := unix.Open(deep, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	must(t, err)
	name := strings.Repeat("n", 255)
	for range 100 {
		must(t, unix.Mkdirat(fd, name, 0o755))
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
	}
	unix.Close(fd)
	if _, err := TakeBaseline(context.Background(), deep); !errors.Is(err, ErrBaselineTooLarge) {
		t.Fatalf("1.3 MB of paths: %v, want ErrBaselineTooLarge", err)
	}

	f := newFakeOverlay(t)
	in := f.input(t)
	in.Baseline = &Baseline{Entries: make([]BaselineEntry, MaxBaselineEntries+1)}
	if _, err := Run(context.Background(), in); err == nil {
		t.Fatal("Run took a baseline larger than the bound")
	}
	bind := bindInput(t, t.TempDir(), time.Now())
	bind.Baseline = &Baseline{}
	if _, err := Run(context.Background(), bind); err == nil {
		t.Fatal("Run took a baseline with the bind layout")
	}
}

// TestTakeBaseline: every entry with its type, inode and ctime; a
// symlink to a directory is recorded, never followed.
func TestTakeBaseline(t *testing.T) {
	upper := t.TempDir()
	writeFile(t, upper, "etc/hosts", "x", 0o644)
	must(t, os.Symlink("/", filepath.Join(upper, "etc/root")))
	b, err := TakeBaseline(context.Background(), upper)
	must(t, err)
	var got []string
	for _, e := range b.Entries {
		var st unix.Stat_t
		must(t, unix.Lstat(filepath.Join(upper, e.Path), &st))
		if e.Type != st.Mode&unix.S_IFMT || e.Ino != st.Ino || e.Ctime != st.Ctim.Nano() {
			t.Errorf("%s: recorded %+v, lstat %o ino %d ctime %d", e.Path, e, st.Mode, st.Ino, st.Ctim.Nano())
		}
		got = append(got, e.Path)
	}
	if strings.Join(got, ",") != "etc,etc/hosts,etc/root" {
		t.Fatalf("entries %v", got)
	}
}

// BenchmarkTakeBaseline: the cost the front doors add before the table
// is installed. A fresh snapshot's upper directory is empty, or holds the
// engine's few entries (podman's /etc and /etc/mtab, runc's stubs).
func BenchmarkTakeBaseline(b *testing.B) {
	for _, n := range []int{0, 8, MaxBaselineEntries} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			// n entries: n/2 directories of one file each, up to 64 of them.
			dirs := min(n/2, 64)
			upper := b.TempDir()
			for i := range n - dirs {
				d := filepath.Join(upper, fmt.Sprintf("d%02d", i%dirs))
				if err := os.MkdirAll(d, 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := TakeBaseline(context.Background(), upper); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// memDir is a temporary directory on /dev/shm when it is there: making
// thousands of files costs about a millisecond each on the test VMs' ext4
// and microseconds on tmpfs.
func memDir(t *testing.T) string {
	d, err := os.MkdirTemp("/dev/shm", "gensee-gate-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestBaselineOnly: under Input.BaselineOnly a tree that holds only its
// baseline, unchanged, gets the very result the full run gives it; a
// tree with any entry of the workload's (new, or a baseline entry
// changed) stops with ErrBeyondBaseline, nothing staged.
func TestBaselineOnly(t *testing.T) {
	result := spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"}
	for _, tc := range []struct {
		name     string
		workload func(t *testing.T, upper string)
		beyond   bool
	}{
		{"unchanged", func(*testing.T, string) {}, false},
		{"new file", func(t *testing.T, upper string) { writeFile(t, upper, "ws/out/result.json", `{"ok":true}`, 0o644) }, true},
		{"baseline entry changed", func(t *testing.T, upper string) { must(t, os.Chmod(filepath.Join(upper, "ws/stray"), 0o600)) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeOverlay(t)
			mkdirAll(t, f.lower, "etc")
			b, start := f.beforeStart(t, func(upper string) {
				podmanMtab(t, upper)
				writeFile(t, upper, "ws/stray", "left by an earlier run", 0o644)
			})
			tc.workload(t, f.upper)
			in := f.input(t, result)
			in.StartTime, in.Baseline = start, b
			only := in
			only.BaselineOnly = true
			got, err := Run(context.Background(), only)
			if tc.beyond {
				if !errors.Is(err, ErrBeyondBaseline) {
					t.Fatalf("Run(BaselineOnly) = %+v, %v; want ErrBeyondBaseline", got, err)
				}
				if ents, _ := os.ReadDir(in.StagingDir); len(ents) != 0 {
					t.Fatalf("staged %v though the run stopped", ents)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run(BaselineOnly): %v", err)
			}
			want := runGate(t, in)
			if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", *want) {
				t.Fatalf("baseline-only result\n%+v\nfull run\n%+v", *got, *want)
			}
		})
	}
}
