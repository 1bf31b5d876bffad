package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/verify"
	"github.com/gensee/gensee/spec"

	"golang.org/x/sys/unix"
)

func TestManifestVerifyPasses(t *testing.T) {
	fx := newOpFixture(t)
	// result.json, a.txt, b.txt, sub/c.txt, the link, changes.patch.
	fx.run(t, "manifest", "verify", "--container", fxContainer, "--namespace", fxNamespace).
		want(t, ExitOK, []string{"verified: 6 files of 4 staged product(s)"}, nil)
}

// TestManifestVerifyMismatches tampers with a fresh fixture per case and
// wants exit 1 with one line naming the path (and, for content, both
// digests).
func TestManifestVerifyMismatches(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, fx *opFixture)
		want   func(fx *opFixture) []string
	}{
		{"flipped byte", func(t *testing.T, fx *opFixture) {
			flipByte(t, fx.staged("out/result.json"))
		}, func(fx *opFixture) []string {
			now, _ := os.ReadFile(fx.staged("out/result.json"))
			return []string{"staged/out/result.json: sha256: expected " + fx.sums["out/result.json"] + ", actual " + hexOf(now)}
		}},
		{"flipped byte in a blob set", func(t *testing.T, fx *opFixture) {
			flipByte(t, fx.staged("out/blobs/a.txt"))
		}, func(fx *opFixture) []string {
			return []string{"staged/out/blobs/a.txt: sha256: expected " + hexOf([]byte("a\n")) + ", actual " + hexOf([]byte("`\n")),
				"staged/out/blobs: tree digest: expected "}
		}},
		{"patch changed", func(t *testing.T, fx *opFixture) {
			os.WriteFile(fx.staged("changes.patch"), []byte("{}\n"), 0o644)
		}, func(fx *opFixture) []string {
			return []string{"staged/changes.patch: sha256: expected " + fx.sums["changes.patch"] + ", actual " + hexOf([]byte("{}\n"))}
		}},
		{"grown file", func(t *testing.T, fx *opFixture) {
			appendTo(t, fx.staged("out/tree/sub/c.txt"), "c")
		}, func(fx *opFixture) []string {
			return []string{"staged/out/tree/sub/c.txt: sha256:", "staged/out/tree/sub/c.txt: size: expected 3, actual 4"}
		}},
		{"deleted", func(t *testing.T, fx *opFixture) {
			os.Remove(fx.staged("out/result.json"))
		}, func(fx *opFixture) []string {
			return []string{"staged/out/result.json: missing: expected file sha256 " + fx.sums["out/result.json"] + ", actual nothing staged"}
		}},
		{"deleted from a tree", func(t *testing.T, fx *opFixture) {
			os.RemoveAll(fx.staged("out/tree/sub"))
		}, func(fx *opFixture) []string {
			return []string{"staged/out/tree/sub: missing", "staged/out/tree/sub/c.txt: missing", "staged/out/tree: tree digest"}
		}},
		{"extra file", func(t *testing.T, fx *opFixture) {
			os.WriteFile(fx.staged("out/extra.txt"), []byte("x"), 0o644)
		}, func(fx *opFixture) []string {
			return []string{"staged/out/extra.txt: extra: expected nothing (not in the manifest), actual file sha256 " + hexOf([]byte("x"))}
		}},
		{"extra file in a blob set", func(t *testing.T, fx *opFixture) {
			os.WriteFile(fx.staged("out/blobs/c.txt"), []byte("x"), 0o644)
		}, func(fx *opFixture) []string { return []string{"staged/out/blobs/c.txt: extra"} }},
		{"extra fifo is never opened", func(t *testing.T, fx *opFixture) {
			if err := unix.Mkfifo(fx.staged("pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(fx *opFixture) []string {
			return []string{"staged/pipe: extra: expected nothing (not in the manifest), actual fifo"}
		}},
		{"failed product staged", func(t *testing.T, fx *opFixture) {
			os.WriteFile(fx.staged("out/bad.json"), []byte(`{"ok": tru`), 0o644)
		}, func(fx *opFixture) []string {
			return []string{"staged/out/bad.json: staged although the product failed the gate: expected nothing, actual file sha256 " + hexOf([]byte(`{"ok": tru`))}
		}},
		{"file replaced by a symlink", func(t *testing.T, fx *opFixture) {
			p := fx.staged("out/result.json")
			os.Rename(p, p+".real")
			os.Symlink("result.json.real", p)
		}, func(fx *opFixture) []string {
			return []string{"staged/out/result.json: type: expected file, actual symlink sha256 " + hexOf([]byte("result.json.real"))}
		}},
		{"directory replaced by a symlink", func(t *testing.T, fx *opFixture) {
			p := fx.staged("out/blobs")
			os.Rename(p, p+".real")
			os.Symlink("blobs.real", p)
		}, func(fx *opFixture) []string {
			return []string{"staged/out/blobs: type: expected dir, actual symlink", "staged/out/blobs/a.txt: missing"}
		}},
		{"symlink retargeted", func(t *testing.T, fx *opFixture) {
			p := fx.staged("out/tree/link")
			os.Remove(p)
			os.Symlink("/etc/passwd", p)
		}, func(fx *opFixture) []string {
			return []string{`staged/out/tree/link: target: expected "sub/c.txt", actual "/etc/passwd"`}
		}},
		{"manifest digest edited", func(t *testing.T, fx *opFixture) {
			fx.m.Products[1].Entries[1].Mode = "4755"
			fx.writeManifest(t)
		}, func(fx *opFixture) []string {
			return []string{"staged/out/blobs: tree digest: expected " + fx.m.Products[1].TreeDigest}
		}},
		{"passing product without a staged path", func(t *testing.T, fx *opFixture) {
			fx.m.Products[3].Staged = ""
			fx.writeManifest(t)
		}, func(fx *opFixture) []string {
			return []string{"manifest: products[3] (changes.patch) passed the gate but records no staged path", "staged/changes.patch: extra"}
		}},
		{"staged path escapes", func(t *testing.T, fx *opFixture) {
			fx.m.Products[0].Staged = "staged/../manifest.json"
			fx.writeManifest(t)
		}, func(fx *opFixture) []string {
			return []string{`manifest: products[0] (out/result.json) staged path "staged/../manifest.json" is not a clean path under staged/`}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newOpFixture(t)
			tc.tamper(t, fx)
			r := fx.run(t, "manifest", "verify", "--operation", fxOperation)
			r.want(t, ExitRefused, tc.want(fx), []string{"do not match the manifest"})
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if !strings.HasPrefix(l, fx.dir+"/") && !strings.HasPrefix(l, "manifest: ") {
					t.Errorf("line does not name a path under the operation: %q", l)
				}
			}
		})
	}
}

func flipByte(t *testing.T, p string) {
	t.Helper()
	b := readFile(t, p)
	b[0] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestManifestVerifyRaisesAttention: a mismatch appends a product_mismatch
// event (and the watchdog's control_defeat) to the operation's events and
// raises its attention, which attention list shows; verify still exits 1,
// and running it again on the same damage raises nothing more.
func TestManifestVerifyRaisesAttention(t *testing.T) {
	fx := newOpFixture(t)
	flipByte(t, fx.staged("out/result.json"))
	os.WriteFile(fx.staged("out/extra.txt"), []byte("x"), 0o644)
	verify := func() result {
		return fx.run(t, "manifest", "verify", "--operation", fxOperation)
	}
	verify().want(t, ExitRefused, []string{"staged/out/result.json: sha256"},
		[]string{"do not match the manifest", "attention raised on operation " + fxOperation + ": 2 findings product_mismatch"})

	var items []AttentionItem
	r := fx.run(t, "attention", "list", "--json")
	r.want(t, ExitOK, nil, nil)
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
		t.Fatalf("attention list --json: %v\n%s", err, r.stdout)
	}
	if len(items) != 1 || items[0].OperationID != fxOperation || len(items[0].Findings) != 2 {
		t.Fatalf("attention %+v, want 2 findings on %s", items, fxOperation)
	}
	for _, f := range items[0].Findings {
		if f.Signature != "product_mismatch" || f.Evidence != 1 {
			t.Errorf("finding %+v, want product_mismatch with one evidence event", f)
		}
	}
	if d := items[0].Findings[0].Detail; !strings.Contains(d, "out/result.json") || !strings.Contains(d, "sha256:"+fx.sums["out/result.json"]) {
		t.Errorf("detail %q lacks the slot or the expected digest", d)
	}

	evs := readEvents(t, fx.dir)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind+" "+e.Target)
	}
	want := []string{"product_mismatch out/result.json", "control_defeat out/result.json", "product_mismatch out/extra.txt", "control_defeat out/extra.txt"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
	fx.run(t, "events", "--operation", fxOperation).want(t, ExitOK, []string{"product_mismatch", "out/result.json"}, nil)

	verify().want(t, ExitRefused, nil, []string{"already has attention for these problems"})
	if n := len(readEvents(t, fx.dir)); n != len(want) {
		t.Errorf("second verify appended events: %d, want %d", n, len(want))
	}
	fx.run(t, "attention", "clear", "--operation", fxOperation).want(t, ExitOK, []string{"2 findings"}, nil)
	verify().want(t, ExitRefused, nil, []string{"attention raised on operation"})
}

// TestManifestVerifyOutsideStateDir: with no state dir to record in, verify
// says so and its exit code is unchanged.
func TestManifestVerifyOutsideStateDir(t *testing.T) {
	var errb bytes.Buffer
	env := &Env{Stderr: &errb}
	res := &verify.Result{StagedReport: &gate.StagedReport{Mismatches: []gate.Mismatch{{Slot: "out/x", Path: "staged/out/x", What: gate.MismatchMissing}}},
		Slots: []string{"out/x"}, Lines: map[string][]string{"out/x": {"staged/out/x: missing"}}}
	raiseMismatch(env, &operation{id: fxOperation, dir: t.TempDir()}, res, time.Now())
	if !strings.Contains(errb.String(), "no attention raised") {
		t.Fatalf("stderr %q", errb.String())
	}
}

func readEvents(t *testing.T, dir string) []spec.Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []spec.Event
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e spec.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("event line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}
