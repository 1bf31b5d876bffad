package gate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

func TestEqualStreams(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("0123456789", 10)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name  string
		ctx   context.Context
		x, y  io.Reader
		size  int64
		same  bool
		short bool
		read  bool // a *sourceError
		other bool // any other error
	}{
		{"equal", ctx, strings.NewReader(long), iotest.HalfReader(strings.NewReader(long)), 100, true, false, false, false},
		{"empty", ctx, strings.NewReader(""), strings.NewReader(""), 0, true, false, false, false},
		{"last_byte", ctx, strings.NewReader(long), strings.NewReader(long[:99] + "x"), 100, false, false, false, false},
		{"first_byte", ctx, strings.NewReader(long), strings.NewReader("x" + long[1:]), 100, false, false, false, false},
		{"only_size_bytes", ctx, strings.NewReader(long + "tail"), strings.NewReader(long + "TAIL"), 100, true, false, false, false},
		{"x_short", ctx, strings.NewReader(long[:50]), strings.NewReader(long), 100, false, true, false, false},
		{"y_short", ctx, strings.NewReader(long), strings.NewReader(long[:97]), 100, false, true, false, false},
		{"read_error", ctx, strings.NewReader(long), iotest.ErrReader(errors.New("EIO")), 100, false, false, true, false},
		{"cancelled", cancelled, strings.NewReader(long), strings.NewReader(long), 100, false, false, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := make([]byte, 7), make([]byte, 7)
			same, err := equalStreams(c.ctx, c.x, c.y, c.size, a, b)
			var se *sourceError
			switch {
			case same != c.same:
				t.Fatalf("same = %v, want %v (err %v)", same, c.same, err)
			case errors.Is(err, errShort) != c.short:
				t.Fatalf("err %v, short want %v", err, c.short)
			case errors.As(err, &se) != c.read:
				t.Fatalf("err %v, source error want %v", err, c.read)
			case c.other && err == nil:
				t.Fatal("no error on a cancelled context")
			case !c.short && !c.read && !c.other && err != nil:
				t.Fatalf("unexpected error %v", err)
			}
		})
	}
}

// countingZeros is an endless stream of zero bytes that counts what it gave.
type countingZeros struct{ n int64 }

func (z *countingZeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

func TestEqualStreamsStopsAtFirstDifference(t *testing.T) {
	x, y := &countingZeros{}, io.MultiReader(bytes.NewReader([]byte{0, 0, 1}), &countingZeros{})
	a, b := make([]byte, 64), make([]byte, 64)
	same, err := equalStreams(context.Background(), x, y, 1<<40, a, b)
	if same || err != nil || x.n != 64 {
		t.Fatalf("same %v err %v after reading %d bytes; want a difference after one 64-byte chunk", same, err, x.n)
	}
}

// fakeOverlay is an overlay layout on plain directories (no mount): the
// walker reads upper and lower the same way, so copy-up accounting can be
// tested without root. Everything in lower and upper gets mtime old.
type fakeOverlay struct {
	lower, upper string
	old          time.Time
}

func newFakeOverlay(t *testing.T) *fakeOverlay {
	base := t.TempDir()
	f := &fakeOverlay{lower: filepath.Join(base, "lower"), upper: filepath.Join(base, "upper"), old: time.Now().Add(-time.Hour).Truncate(time.Second).Add(123456789)}
	mkdirAll(t, f.lower, "ws/out")
	mkdirAll(t, f.upper, "ws/out")
	return f
}

// both writes rel into the image with content img and into the upper layer
// with content up, same mode, and sets both mtimes to f.old.
func (f *fakeOverlay) both(t *testing.T, rel, img, up string) {
	f.setOld(t, writeFile(t, f.lower, rel, img, 0o644))
	f.setOld(t, writeFile(t, f.upper, rel, up, 0o644))
}

// links makes rel a symlink in both layers, with mtimes set to f.old.
func (f *fakeOverlay) links(t *testing.T, rel, img, up string) {
	for _, l := range []struct{ dir, target string }{{f.lower, img}, {f.upper, up}} {
		p := filepath.Join(l.dir, rel)
		must(t, os.Symlink(l.target, p))
		f.setOld(t, p)
	}
}

func (f *fakeOverlay) setOld(t *testing.T, p string) {
	ts := unix.NsecToTimespec(f.old.UnixNano())
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW))
}

func (f *fakeOverlay) input(t *testing.T, products ...spec.Product) Input {
	return Input{UpperDir: f.upper, LowerDirs: []string{f.lower}, Workspace: "/ws", Products: products,
		StagingDir: filepath.Join(t.TempDir(), "staged"), StartTime: time.Now()}
}

func unclaimedDigest(paths ...string) string {
	var lines []string
	for _, p := range paths {
		lines = append(lines, unclaimedLine(p, chModify))
	}
	return digestLines(lines)
}

func TestCopyUpComparedByContent(t *testing.T) {
	f := newFakeOverlay(t)
	f.both(t, "etc/same", "image bytes", "image bytes")
	f.both(t, "etc/empty", "", "")
	f.both(t, "etc/passwd", "root:x:0:0", "evil:x:0:0")                                    // same length, mtime set back
	f.both(t, "etc/big", strings.Repeat("a", 600<<10), strings.Repeat("a", 600<<10-1)+"b") // differs in the third chunk
	f.links(t, "etc/ln-same", "target", "target")
	f.links(t, "etc/ln-new", "target", "tarXet")
	res := runGate(t, f.input(t))
	want := []string{"/etc/big", "/etc/ln-new", "/etc/passwd"}
	if res.Verdict != Pass || res.Unclaimed.Count != 3 || strings.Join(res.Unclaimed.Sample, ",") != strings.Join(want, ",") {
		t.Fatalf("verdict %s unclaimed %+v anomalies %+v; want %v counted as modified", res.Verdict, res.Unclaimed, res.Anomalies, want)
	}
	if got := unclaimedDigest(want...); res.Unclaimed.Digest != got {
		t.Fatalf("digest %s, want %s (ordinary modify lines)", res.Unclaimed.Digest, got)
	}
}

func TestCopyUpCompareCap(t *testing.T) {
	f := newFakeOverlay(t)
	f.both(t, "a/first", "0123456789", "0123456789")
	f.both(t, "ws/second", "0123456789", "0123456789")
	f.both(t, "z/third", "0123456789", "0123456789")
	in := f.input(t, spec.Product{Class: spec.ClassWorkspacePatch, Slot: "p"})
	in.CompareBytes = 15
	res := runGate(t, in)
	if res.Verdict != Fail || len(res.Anomalies) != 1 || res.Anomalies[0].Rule != RuleOverMaxBytes || res.Anomalies[0].Path != "/ws/second" {
		t.Fatalf("verdict %s anomalies %+v: want one over_max_bytes anomaly, at the first file past the compare cap", res.Verdict, res.Anomalies)
	}
	requireRule(t, res, "p", RuleOverMaxBytes) // the patch owned it
	if res.Unclaimed.Count != 1 || res.Unclaimed.Digest != unclaimedDigest("/z/third") {
		t.Fatalf("unclaimed %+v: a file past the cap must count as modified, the one compared before it not", res.Unclaimed)
	}
}

func TestCopyUpImageNotRegular(t *testing.T) {
	f := newFakeOverlay(t)
	f.both(t, "etc/f", "same", "same")
	// The image side is a FIFO with the file's metadata: it must never be
	// opened (the walk would block), and it is a type change anyway.
	must(t, os.Remove(filepath.Join(f.lower, "etc/f")))
	must(t, unix.Mkfifo(filepath.Join(f.lower, "etc/f"), 0o644))
	f.setOld(t, filepath.Join(f.lower, "etc/f"))
	res := runGate(t, f.input(t))
	if res.Unclaimed.Count != 1 || res.Unclaimed.Digest != digestLines([]string{unclaimedLine("/etc/f", chReplace)}) {
		t.Fatalf("unclaimed %+v", res.Unclaimed)
	}
}

func TestCopyUpInPatchAndSlot(t *testing.T) {
	f := newFakeOverlay(t)
	f.both(t, "ws/src.go", "package a", "package b")
	f.both(t, "ws/keep.go", "package k", "package k")
	f.both(t, "ws/out/r.json", `{"a":1}`, `{"a":2}`)
	f.both(t, "ws/out/s.json", `{"a":1}`, `{"a":1}`)
	res := runGate(t, f.input(t,
		spec.Product{Class: spec.ClassWorkspacePatch, Slot: "p.jsonl"},
		spec.Product{Class: spec.ClassStructuredResult, Slot: "out/r.json"},
		spec.Product{Class: spec.ClassStructuredResult, Slot: "out/s.json"}))
	patch := productOf(t, res, "p.jsonl")
	if patch.Verdict != Pass {
		t.Fatalf("patch %+v", patch)
	}
	ops := map[string]string{}
	for _, e := range patch.Entries {
		ops[e.Path] = e.Op
	}
	if lines := readPatch(t, patch.Staged); lines["src.go"] != "package b" || ops["src.go"] != "modify" {
		t.Errorf("content change with mtime set back is not a modify line in the patch: %q %q", lines, ops)
	}
	if _, ok := ops["keep.go"]; ok {
		t.Errorf("patch lists a copy-up that holds the image's bytes: %q", ops)
	}
	for slot, word := range map[string]string{"out/r.json": "set back", "out/s.json": "copy-up only"} {
		p := requireRule(t, res, slot, RulePartial)
		if !strings.Contains(p.Violations[0].Detail, word) {
			t.Errorf("%s: detail %q does not say %q", slot, p.Violations[0].Detail, word)
		}
	}
}
