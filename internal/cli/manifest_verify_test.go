package cli

import (
	"os"
	"strings"
	"testing"

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
