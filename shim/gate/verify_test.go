package gate

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// stagedOp gates a bind rootfs holding one product of each kind into
// <opDir>/staged, as the front doors do, and returns opDir and the
// products as the manifest records them (shim/engine's conversion).
func stagedOp(t *testing.T) (string, []spec.ProductRecord) {
	t.Helper()
	root, opDir := t.TempDir(), t.TempDir()
	start := time.Now()
	writeFile(t, root, "ws/out/app.bin", "binary\x00data", 0o755)
	writeFile(t, root, "ws/out/set/a.txt", "alpha", 0o644)
	writeFile(t, root, "ws/out/site/css/main.css", "body{}", 0o600)
	writeFile(t, root, "ws/out/site/index.html", "<html/>", 0o644)
	if err := os.Symlink("index.html", filepath.Join(root, "ws/out/site/home.html")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "ws/out/result.json", `{"ok":true}`, 0o644)
	writeFile(t, root, "ws/out/bad.json", `{"ok": tru`, 0o644)
	in := bindInput(t, root, start,
		spec.Product{Class: spec.ClassBlob, Slot: "out/app.bin", Modes: []string{"0755"}},
		spec.Product{Class: spec.ClassBlobSet, Slot: "out/set"},
		spec.Product{Class: spec.ClassDirectoryTree, Slot: "out/site", AllowSymlinks: true},
		spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"},
		spec.Product{Class: spec.ClassStructuredResult, Slot: "out/bad.json"},
		spec.Product{Class: spec.ClassWorkspacePatch, Slot: "patch.jsonl", AllowSymlinks: true},
	)
	in.StagingDir = filepath.Join(opDir, record.StagedDir)
	res := runGate(t, in)
	var prs []spec.ProductRecord
	for _, p := range res.Products {
		pr := spec.ProductRecord{Class: p.Class, Slot: p.Slot, Verdict: string(p.Verdict), Bytes: p.Bytes,
			SHA256: p.SHA256, TreeDigest: p.TreeDigest}
		if p.Staged != "" {
			pr.Staged = path.Join(record.StagedDir, p.Slot)
		}
		for _, e := range p.Entries {
			pr.Entries = append(pr.Entries, spec.EntryRecord{Op: e.Op, Path: e.Path, Type: e.Type, Mode: e.Mode, Size: e.Size, SHA256: e.SHA256, Target: e.Target})
		}
		prs = append(prs, pr)
	}
	if prs[4].Verdict != spec.VerdictFail {
		t.Fatalf("out/bad.json: %+v, want a failed product", prs[4])
	}
	return opDir, prs
}

// TestVerifyStagedRoundTrip: what Run staged verifies clean against what
// it reported.
func TestVerifyStagedRoundTrip(t *testing.T) {
	opDir, prs := stagedOp(t)
	rep, err := VerifyStaged(opDir, prs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Mismatches) != 0 {
		t.Fatalf("mismatches on an untouched staging dir: %+v", rep.Mismatches)
	}
	// app.bin, set/a.txt, site/{main.css,index.html,home.html}, result.json, patch.jsonl
	if rep.Files != 7 || rep.Products != 5 {
		t.Errorf("files %d products %d, want 7 and 5", rep.Files, rep.Products)
	}
}

// TestVerifyStagedTampered changes the staged tree (or the record) after
// the gate ran and wants each change named by slot, path and kind.
func TestVerifyStagedTampered(t *testing.T) {
	staged := func(opDir, rel string) string { return filepath.Join(opDir, record.StagedDir, rel) }
	cases := []struct {
		name   string
		tamper func(t *testing.T, opDir string, prs []spec.ProductRecord)
		want   []Mismatch // Slot, Path, What (and Record) compared
	}{
		{"flipped byte", func(t *testing.T, d string, _ []spec.ProductRecord) {
			must(t, os.WriteFile(staged(d, "out/app.bin"), []byte("Binary\x00data"), 0o644))
		}, []Mismatch{{Slot: "out/app.bin", Path: "staged/out/app.bin", What: MismatchSHA256}}},
		{"grown tree file", func(t *testing.T, d string, _ []spec.ProductRecord) {
			must(t, os.WriteFile(staged(d, "out/site/css/main.css"), []byte("body{}x"), 0o644))
		}, []Mismatch{
			{Slot: "out/site", Path: "staged/out/site/css/main.css", What: MismatchSHA256},
			{Slot: "out/site", Path: "staged/out/site/css/main.css", What: MismatchSize},
			{Slot: "out/site", Path: "staged/out/site", What: MismatchTreeDigest},
		}},
		{"deleted", func(t *testing.T, d string, _ []spec.ProductRecord) {
			must(t, os.Remove(staged(d, "out/result.json")))
		}, []Mismatch{{Slot: "out/result.json", Path: "staged/out/result.json", What: MismatchMissing}}},
		{"symlink retargeted", func(t *testing.T, d string, _ []spec.ProductRecord) {
			p := staged(d, "out/site/home.html")
			must(t, os.Remove(p))
			must(t, os.Symlink("/etc/passwd", p))
		}, []Mismatch{
			{Slot: "out/site", Path: "staged/out/site/home.html", What: MismatchSHA256},
			{Slot: "out/site", Path: "staged/out/site/home.html", What: MismatchSize},
			{Slot: "out/site", Path: "staged/out/site/home.html", What: MismatchTarget},
			{Slot: "out/site", Path: "staged/out/site", What: MismatchTreeDigest},
		}},
		{"directory replaced by a symlink is not followed", func(t *testing.T, d string, _ []spec.ProductRecord) {
			p := staged(d, "out/set")
			must(t, os.Rename(p, p+".real"))
			must(t, os.Symlink("set.real", p))
		}, []Mismatch{
			{Slot: "out/set", Path: "staged/out/set", What: MismatchType},
			{Slot: "out/set", Path: "staged/out/set/a.txt", What: MismatchMissing},
			{Slot: "out/set", Path: "staged/out/set", What: MismatchTreeDigest},
			{Slot: "out/set.real", Path: "staged/out/set.real", What: MismatchExtra},
			{Slot: "out/set.real/a.txt", Path: "staged/out/set.real/a.txt", What: MismatchExtra},
		}},
		{"extra fifo is never opened", func(t *testing.T, d string, _ []spec.ProductRecord) {
			must(t, unix.Mkfifo(staged(d, "pipe"), 0o644))
		}, []Mismatch{{Slot: "pipe", Path: "staged/pipe", What: MismatchExtra}}},
		{"failed product staged", func(t *testing.T, d string, _ []spec.ProductRecord) {
			must(t, os.WriteFile(staged(d, "out/bad.json"), []byte("{}"), 0o644))
		}, []Mismatch{{Slot: "out/bad.json", Path: "staged/out/bad.json", What: MismatchStagedFailed}}},
		{"record escapes", func(t *testing.T, _ string, prs []spec.ProductRecord) {
			prs[0].Staged = "staged/../manifest.json"
		}, []Mismatch{
			{Slot: "out/app.bin", Record: `products[0] (out/app.bin) staged path "staged/../manifest.json" is not a clean path under staged/`},
			{Slot: "out/app.bin", Path: "staged/out/app.bin", What: MismatchExtra},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opDir, prs := stagedOp(t)
			tc.tamper(t, opDir, prs)
			rep, err := VerifyStaged(opDir, prs)
			if err != nil {
				t.Fatal(err)
			}
			var got []Mismatch
			for _, m := range rep.Mismatches {
				got = append(got, Mismatch{Slot: m.Slot, Path: m.Path, What: m.What, Record: m.Record})
				if m.Record == "" && (m.Expected == "" || m.Actual == "") {
					t.Errorf("%+v: expected and actual must both be said", m)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("mismatches:\n%s\nwant:\n%s", dump(got), dump(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("mismatch %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestVerifyStagedUnreadable: an operation directory that is a symlink is
// an error, never followed.
func TestVerifyStagedUnreadable(t *testing.T) {
	opDir, prs := stagedOp(t)
	link := filepath.Join(t.TempDir(), "op")
	must(t, os.Symlink(opDir, link))
	if _, err := VerifyStaged(link, prs); err == nil {
		t.Fatal("a symlinked operation directory was followed")
	}
}

func dump(ms []Mismatch) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString("  ")
		if m.Record != "" {
			b.WriteString("record: " + m.Record + "\n")
			continue
		}
		b.WriteString(m.Slot + " " + m.Path + " " + m.What + "\n")
	}
	return b.String()
}
