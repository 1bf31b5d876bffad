package gate

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestBindEveryClassPasses(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	writeFile(t, root, "ws/out/app.bin", "binary\x00data", 0o755)
	writeFile(t, root, "ws/out/set/a.txt", "alpha", 0o644)
	writeFile(t, root, "ws/out/set/b.txt", "beta", 0o644)
	writeFile(t, root, "ws/out/site/index.html", "<html/>", 0o644)
	writeFile(t, root, "ws/out/site/css/main.css", "body{}", 0o600)
	if err := os.Symlink("index.html", filepath.Join(root, "ws/out/site/home.html")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "ws/out/result.json", `{"ok":true,"items":[1,2,{"a":"b"}]}`, 0o644)
	writeFile(t, root, "ws/out/env", "PATH=/bin\nEMPTY=\nX_1=a=b\n", 0o644)
	writeFile(t, root, "ws/out/env.json", `{"A":"1","b_2":""}`, 0o644)
	writeFile(t, root, "ws/.git/HEAD", "ref", 0o644) // excluded
	writeFile(t, root, "etc/hosts.new", "x", 0o644)  // outside the workspace: unclaimed
	in := bindInput(t, root, start,
		spec.Product{Class: spec.ClassBlob, Slot: "out/app.bin", Modes: []string{"0755"}},
		spec.Product{Class: spec.ClassBlobSet, Slot: "out/set"},
		spec.Product{Class: spec.ClassDirectoryTree, Slot: "out/site", AllowSymlinks: true},
		spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"},
		spec.Product{Class: spec.ClassEnvironmentSnapshot, Slot: "out/env"},
		spec.Product{Class: spec.ClassEnvironmentSnapshot, Slot: "out/env.json"},
		spec.Product{Class: spec.ClassWorkspacePatch, Slot: "patch.jsonl", AllowSymlinks: true},
	)
	res := runGate(t, in)
	if res.Verdict != Pass {
		t.Fatalf("verdict %s: %+v", res.Verdict, res)
	}
	blob := requirePass(t, res, "out/app.bin")
	if blob.SHA256 != sha("binary\x00data") {
		t.Errorf("blob sha256 %s", blob.SHA256)
	}
	if b, _ := os.ReadFile(blob.Staged); string(b) != "binary\x00data" {
		t.Errorf("staged blob content %q", b)
	}
	set := requirePass(t, res, "out/set")
	if len(set.Entries) != 2 || set.TreeDigest == "" {
		t.Errorf("blob_set entries %+v digest %q", set.Entries, set.TreeDigest)
	}
	site := requirePass(t, res, "out/site")
	want := TreeDigest("out/site", []Entry{
		{Path: "out/site/css", Type: "dir", Mode: "0755"},
		{Path: "out/site/css/main.css", Type: "file", Mode: "0600", Size: 6, SHA256: sha("body{}")},
		{Path: "out/site/home.html", Type: "symlink", Mode: "0777", Size: 10, SHA256: sha("index.html")},
		{Path: "out/site/index.html", Type: "file", Mode: "0644", Size: 7, SHA256: sha("<html/>")},
	})
	if site.TreeDigest != want {
		t.Errorf("tree digest %s, want %s (entries %+v)", site.TreeDigest, want, site.Entries)
	}
	if tgt, err := os.Readlink(filepath.Join(site.Staged, "home.html")); err != nil || tgt != "index.html" {
		t.Errorf("staged symlink: %q %v", tgt, err)
	}
	requirePass(t, res, "out/result.json")
	requirePass(t, res, "out/env")
	requirePass(t, res, "out/env.json")
	patch := requirePass(t, res, "patch.jsonl")
	lines := readPatch(t, patch.Staged)
	if c, ok := lines["out/result.json"]; !ok || c != `{"ok":true,"items":[1,2,{"a":"b"}]}` {
		t.Errorf("patch content for out/result.json: %q %v", c, ok)
	}
	if _, ok := lines[".git/HEAD"]; ok {
		t.Error("patch includes an excluded path")
	}
	if res.Excluded.Entries != 1 {
		t.Errorf("excluded %+v", res.Excluded)
	}
	if res.Unclaimed.Count != 2 || strings.Join(res.Unclaimed.Sample, ",") != "/etc,/etc/hosts.new" {
		t.Errorf("unclaimed %+v", res.Unclaimed)
	}
}

// readPatch parses a staged patch and returns path -> decoded content.
func readPatch(t testing.TB, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l struct {
			Op, Path, Type, Mode, Content, SHA256, Target string
			Size                                          int64
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("patch line %q: %v", sc.Text(), err)
		}
		switch l.Type {
		case "file":
			b, err := base64.StdEncoding.DecodeString(l.Content)
			if err != nil || int64(len(b)) != l.Size || sha(string(b)) != l.SHA256 {
				t.Fatalf("patch line for %s: bad content/size/sha (%v)", l.Path, err)
			}
			out[l.Path] = string(b)
		default:
			out[l.Path] = l.Op + ":" + l.Type + ":" + l.Target
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBindPatchOpsAreOrdered(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	writeFile(t, root, "ws/b/z", "z", 0o644)
	writeFile(t, root, "ws/a.c", "ac", 0o644)
	writeFile(t, root, "ws/a/x", "x", 0o644)
	res := runGate(t, bindInput(t, root, start, spec.Product{Class: spec.ClassWorkspacePatch, Slot: "p"}))
	p := requirePass(t, res, "p")
	var paths []string
	for _, e := range p.Entries {
		paths = append(paths, e.Op+" "+e.Path)
	}
	want := "add a,add a/x,add a.c,add b,add b/z"
	if got := strings.Join(paths, ","); got != want {
		t.Fatalf("patch order %q, want %q", got, want)
	}
}
