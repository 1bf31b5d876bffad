package promote

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fixture is an operation record as the gate leaves it, with three staged
// products (a structured result, a directory tree holding an executable
// and a symlink, a workspace patch), and a promotion root.
type fixture struct {
	st       record.Store
	dir      string // the operation directory
	root     string // the promotion root
	manifest []byte // manifest.json as written
	m        spec.Manifest
}

const (
	resultBody = `{"ok":true}` + "\n"
	patchBody  = `{"op":"add","path":"x","type":"file","mode":"0644","size":0,"content":"","sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}` + "\n"
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{st: record.Store{Dir: filepath.Join(base, "state")}, root: filepath.Join(base, "promoted")}
	must(t, os.MkdirAll(f.root, 0o755))
	dir, err := f.st.CreateOperation(opID, "default", "job")
	must(t, err)
	f.dir = dir
	staged := filepath.Join(dir, record.StagedDir)
	write := func(rel, body string, mode os.FileMode) {
		p := filepath.Join(staged, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), mode))
		must(t, os.Chmod(p, mode))
	}
	write("out/result.json", resultBody, 0o644)
	write("out/changes.patch", patchBody, 0o644)
	write("out/tree/README", "read me\n", 0o644)
	write("out/tree/bin/run", "#!/bin/sh\necho hi\n", 0o755)
	must(t, os.Symlink("bin/run", filepath.Join(staged, "out/tree/run")))

	tree := []gate.Entry{
		{Path: "out/tree/README", Type: "file", Mode: "0644", Size: 8, SHA256: sum([]byte("read me\n"))},
		{Path: "out/tree/bin", Type: "dir", Mode: "0755"},
		{Path: "out/tree/bin/run", Type: "file", Mode: "0755", Size: 18, SHA256: sum([]byte("#!/bin/sh\necho hi\n"))},
		{Path: "out/tree/run", Type: "symlink", Mode: "0777", Size: 7, SHA256: sum([]byte("bin/run")), Target: "bin/run"},
	}
	treeRec := spec.ProductRecord{Class: spec.ClassDirectoryTree, Slot: "out/tree", Verdict: spec.VerdictPass, Bytes: 26,
		TreeDigest: gate.TreeDigest("out/tree", tree), Staged: "staged/out/tree"}
	for _, e := range tree {
		treeRec.Entries = append(treeRec.Entries, spec.EntryRecord{Path: e.Path, Type: e.Type, Mode: e.Mode, Size: e.Size, SHA256: e.SHA256, Target: e.Target})
	}
	f.m = spec.Manifest{
		Schema: spec.SchemaManifest, OperationID: opID, Namespace: "default", ContainerID: "job",
		Gate: spec.GateResult{Verdict: spec.VerdictPass},
		Products: []spec.ProductRecord{
			{Class: spec.ClassStructuredResult, Slot: "out/result.json", Verdict: spec.VerdictPass, Bytes: int64(len(resultBody)),
				SHA256: sum([]byte(resultBody)), Staged: "staged/out/result.json",
				Entries: []spec.EntryRecord{{Path: "out/result.json", Type: "file", Mode: "0644", Size: int64(len(resultBody)), SHA256: sum([]byte(resultBody))}}},
			treeRec,
			{Class: spec.ClassWorkspacePatch, Slot: "out/changes.patch", Verdict: spec.VerdictPass, Bytes: 0,
				SHA256: sum([]byte(patchBody)), Staged: "staged/out/changes.patch",
				Entries: []spec.EntryRecord{{Op: "add", Path: "x", Type: "file", Mode: "0644"}}},
		},
	}
	f.manifest, err = json.MarshalIndent(f.m, "", "  ")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, record.ManifestFile), f.manifest, 0o600))
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) product(slot string) spec.ProductRecord {
	for _, p := range f.m.Products {
		if p.Slot == slot {
			return p
		}
	}
	panic(slot)
}

// request promotes slot to dest (below the root) with a receipt signed by
// the verifier of its class.
func (f *fixture) request(t *testing.T, slot, dest string, edit func(*spec.Receipt)) Request {
	pr := f.product(slot)
	verifier, k := "json-schema", key(1)
	if pr.Class != spec.ClassStructuredResult {
		verifier, k = "trees", key(2)
	}
	r := receiptFor(pr, verifier)
	if edit != nil {
		edit(&r)
	}
	return Request{
		Store: f.st, OperationID: opID, Slot: slot, Receipt: sign(t, r, k), Dest: filepath.Join(f.root, dest),
		Roots: []string{f.root}, Trust: func(time.Time) (*spec.Catalog, error) { return testCatalog(), nil },
		EUID: 0, By: spec.Promoter{UID: 0, InvokingUID: 1000, InvokingUser: "dev", SudoUser: "dev"}, Now: now,
	}
}

// listing is everything below dir: path, type, mode, content.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	must(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		line := strings.TrimPrefix(p, dir) + " " + info.Mode().String()
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += " " + sum(b)
		}
		out = append(out, line)
		return nil
	}))
	return out
}

func (f *fixture) records(t *testing.T) []spec.Promotion {
	t.Helper()
	rs, err := Records(f.st, opID)
	must(t, err)
	return rs
}

// TestPromoteResult: a structured result is placed with its staged bytes
// and mode, recorded once with who, when and the receipt, the manifest is
// untouched; a re-run changes nothing and records nothing.
func TestPromoteResult(t *testing.T) {
	f := newFixture(t)
	req := f.request(t, "out/result.json", "result.json", nil)
	res, err := Promote(req)
	if err != nil || !res.Changed || !res.Recorded {
		t.Fatalf("Promote = %+v, %v", res, err)
	}
	dest := filepath.Join(f.root, "result.json")
	b, err := os.ReadFile(dest)
	if err != nil || string(b) != resultBody {
		t.Fatalf("destination %q, %v", b, err)
	}
	if st, _ := os.Stat(dest); st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", st.Mode())
	}
	if got, _ := os.ReadFile(filepath.Join(f.dir, record.ManifestFile)); !bytes.Equal(got, f.manifest) {
		t.Fatal("the manifest changed")
	}
	rs := f.records(t)
	if len(rs) != 1 {
		t.Fatalf("records %+v", rs)
	}
	p := rs[0]
	if p.Destination != dest || p.Slot != "out/result.json" || p.ProductDigest != "sha256:"+sum([]byte(resultBody)) ||
		p.By.InvokingUser != "dev" || p.By.SudoUser != "dev" || !p.At.Equal(now) || p.Verifier != "json-schema" ||
		!strings.HasPrefix(p.ReceiptDigest, "sha256:") || p.Receipt == nil || p.Receipt.PayloadType != spec.PayloadTypeReceipt {
		t.Fatalf("record %+v", p)
	}
	before := listing(t, f.root)
	again, err := Promote(req)
	if err != nil || again.Changed || again.Recorded {
		t.Fatalf("re-run = %+v, %v; want success with nothing changed", again, err)
	}
	if !slices.Equal(listing(t, f.root), before) || len(f.records(t)) != 1 {
		t.Fatal("the re-run changed the destination or the records")
	}
	// The same product already at the destination under a new receipt:
	// nothing placed, the new receipt recorded.
	later := f.request(t, "out/result.json", "result.json", func(r *spec.Receipt) { r.IssuedAt = now.Add(-2 * time.Minute) })
	third, err := Promote(later)
	if err != nil || third.Changed || !third.Recorded || len(f.records(t)) != 2 {
		t.Fatalf("another receipt = %+v, %v", third, err)
	}
}

// TestPromoteTree: a directory tree is placed as one unit (files, modes as
// staged, the symlink as a symlink), but only with a consumer contract
// since it holds an executable; nothing else is left beside it.
func TestPromoteTree(t *testing.T) {
	f := newFixture(t)
	_, err := Promote(f.request(t, "out/tree", "tool", nil))
	if rf, ok := err.(*Refusal); !ok || rf.Rule != RuleExecutable {
		t.Fatalf("an executable without a consumer: %v", err)
	}
	res, err := Promote(f.request(t, "out/tree", "tool", func(r *spec.Receipt) { r.ConsumerContract = "run-tool" }))
	if err != nil || !res.Changed {
		t.Fatalf("Promote = %+v, %v", res, err)
	}
	dest := filepath.Join(f.root, "tool")
	if target, err := os.Readlink(filepath.Join(dest, "run")); err != nil || target != "bin/run" {
		t.Fatalf("symlink %q, %v", target, err)
	}
	for rel, mode := range map[string]os.FileMode{"bin/run": 0o755, "README": 0o644, "bin": 0o755 | os.ModeDir} {
		st, err := os.Lstat(filepath.Join(dest, rel))
		if err != nil || st.Mode() != mode {
			t.Errorf("%s: %v, %v; want %v", rel, st.Mode(), err, mode)
		}
	}
	ents, _ := os.ReadDir(f.root)
	if len(ents) != 1 || ents[0].Name() != "tool" {
		t.Fatalf("the root holds %v, want only the tree", ents)
	}
	if rs := f.records(t); len(rs) != 1 || rs[0].ConsumerContract != "run-tool" || rs[0].ProductDigest != f.product("out/tree").TreeDigest {
		t.Fatalf("records %+v", rs)
	}
	if again, err := Promote(f.request(t, "out/tree", "tool", func(r *spec.Receipt) { r.ConsumerContract = "run-tool" })); err != nil || again.Changed || again.Recorded {
		t.Fatalf("re-run = %+v, %v", again, err)
	}
}

// TestPromotePatch: a workspace patch is placed as its patch file, never
// applied.
func TestPromotePatch(t *testing.T) {
	f := newFixture(t)
	must(t, os.Mkdir(filepath.Join(f.root, "patches"), 0o755))
	if _, err := Promote(f.request(t, "out/changes.patch", "patches/run.patch", nil)); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.root, "patches/run.patch")); err != nil || string(b) != patchBody {
		t.Fatalf("patch %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(f.root, "x")); err == nil {
		t.Fatal("the patch was applied")
	}
}

// TestPromoteRefusals: every refusal names its rule and writes nothing:
// not at the destination, not in the promotion record.
func TestPromoteRefusals(t *testing.T) {
	type setup func(t *testing.T, f *fixture, req *Request)
	for _, c := range []struct {
		name string
		rule string
		slot string
		edit func(*spec.Receipt)
		prep setup
	}{
		{"not root", RuleNotRoot, "", nil, func(_ *testing.T, _ *fixture, req *Request) { req.EUID = 1000 }},
		{"no promotion roots", RuleNoRoots, "", nil, func(_ *testing.T, _ *fixture, req *Request) { req.Roots = nil }},
		{"outside the roots", RuleOutsideRoots, "", nil, func(_ *testing.T, f *fixture, req *Request) {
			req.Dest = filepath.Join(filepath.Dir(f.root), "elsewhere.json")
		}},
		{"trust refused", RuleTrust, "", nil, func(_ *testing.T, _ *fixture, req *Request) {
			req.Trust = func(time.Time) (*spec.Catalog, error) { return nil, errors.New("catalog expired") }
		}},
		{"wrong key", RuleReceiptSignature, "", nil, func(t *testing.T, f *fixture, req *Request) {
			req.Receipt = sign(t, receiptFor(f.product("out/result.json"), "json-schema"), key(9))
		}},
		{"expired", RuleReceiptExpired, "", func(r *spec.Receipt) { r.IssuedAt, r.ExpiresAt = now.Add(-time.Hour), now.Add(-time.Second) }, nil},
		{"over the lifetime", RuleReceiptLifetime, "", func(r *spec.Receipt) { r.ExpiresAt = r.IssuedAt.Add(2 * time.Hour) }, nil},
		{"failed verdict", RuleReceiptVerdict, "", func(r *spec.Receipt) { r.Verdict = spec.ReceiptFail }, nil},
		{"another digest", RuleReceiptBinding, "", func(r *spec.Receipt) { r.ProductDigest = "sha256:" + strings.Repeat("00", 32) }, nil},
		{"another slot", RuleReceiptBinding, "", func(r *spec.Receipt) { r.Slot = "out/other.json" }, nil},
		{"another class", RuleVerifierClass, "", func(r *spec.Receipt) { r.Class = spec.ClassBlob }, nil},
		{"another class, judged by the verifier", RuleReceiptBinding, "out/changes.patch", func(r *spec.Receipt) { r.Class = spec.ClassDirectoryTree }, nil},
		{"another operation", RuleReceiptBinding, "", func(r *spec.Receipt) { r.OperationID = strings.Repeat("f", 32) }, nil},
		{"tampered staged product", RuleStagedMismatch, "", nil, func(t *testing.T, f *fixture, _ *Request) {
			must(t, os.WriteFile(filepath.Join(f.dir, "staged/out/result.json"), []byte(`{"ok":false}`+"\n"), 0o644))
		}},
		{"tampered other product", RuleStagedMismatch, "", nil, func(t *testing.T, f *fixture, _ *Request) {
			must(t, os.WriteFile(filepath.Join(f.dir, "staged/out/tree/README"), []byte("changed\n"), 0o644))
		}},
		{"open finding", RuleOpenFinding, "", nil, func(t *testing.T, f *fixture, _ *Request) {
			_, err := events.RaiseAttention(f.st, opID, spec.Finding{Signature: "table_tampered", Detail: "the table changed", At: now})
			must(t, err)
		}},
		{"no manifest", RuleManifest, "", nil, func(t *testing.T, f *fixture, _ *Request) {
			must(t, os.Remove(filepath.Join(f.dir, record.ManifestFile)))
		}},
		{"invalid manifest", RuleManifest, "", nil, func(t *testing.T, f *fixture, _ *Request) {
			must(t, os.WriteFile(filepath.Join(f.dir, record.ManifestFile), bytes.Replace(f.manifest, []byte(`"promoted": false`), []byte(`"promoted": true`), 1), 0o600))
		}},
		{"destination exists", RuleDestExists, "", nil, func(t *testing.T, f *fixture, _ *Request) {
			must(t, os.WriteFile(filepath.Join(f.root, "result.json"), []byte("other\n"), 0o644))
		}},
		{"destination's directory writable by others", RuleDestWritable, "", nil, func(t *testing.T, f *fixture, req *Request) {
			shared := filepath.Join(f.root, "shared")
			must(t, os.Mkdir(shared, 0o755))
			must(t, os.Chmod(shared, 0o1777))
			req.Dest = filepath.Join(shared, "result.json")
		}},
		{"destination's directory owned by a user", RuleDestWritable, "", nil, func(t *testing.T, f *fixture, req *Request) {
			home := filepath.Join(f.root, "home")
			must(t, os.Mkdir(home, 0o755))
			must(t, os.Chown(home, 65534, 65534))
			req.Dest = filepath.Join(home, "result.json")
		}},
		{"look-alike placed by a user", RuleDestExists, "", nil, func(t *testing.T, f *fixture, _ *Request) {
			p := filepath.Join(f.root, "result.json")
			must(t, os.WriteFile(p, []byte(resultBody), 0o644))
			must(t, os.Chown(p, 65534, 65534))
		}},
		{"look-alike hard-linked", RuleDestExists, "", nil, func(t *testing.T, f *fixture, _ *Request) {
			p := filepath.Join(f.root, "result.json")
			must(t, os.WriteFile(p, []byte(resultBody), 0o644))
			must(t, os.Link(p, filepath.Join(f.root, "other.json")))
		}},
		{"destination's directory missing", RuleDestParent, "", nil, func(t *testing.T, f *fixture, req *Request) {
			req.Dest = filepath.Join(f.root, "missing", "result.json")
		}},
		{"symlink below the root", RuleDestParent, "", nil, func(t *testing.T, f *fixture, req *Request) {
			outside := t.TempDir()
			must(t, os.Symlink(outside, filepath.Join(f.root, "link")))
			req.Dest = filepath.Join(f.root, "link", "result.json")
			t.Cleanup(func() {
				if ents, _ := os.ReadDir(outside); len(ents) != 0 {
					t.Errorf("written through the symlink: %v", ents)
				}
			})
		}},
		{"executable without consumer", RuleExecutable, "out/tree", nil, nil},
		{"unknown consumer", RuleConsumer, "out/tree", func(r *spec.Receipt) { r.ConsumerContract = "nope" }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			slot := c.slot
			if slot == "" {
				slot = "out/result.json"
			}
			req := f.request(t, slot, "result.json", c.edit)
			if c.prep != nil {
				c.prep(t, f, &req)
			}
			before := listing(t, f.root)
			_, err := Promote(req)
			var rf *Refusal
			if !errors.As(err, &rf) || rf.Rule != c.rule {
				t.Fatalf("Promote: %v, want rule %s", err, c.rule)
			}
			if !strings.HasPrefix(rf.Error(), RefusalPrefix+c.rule+": ") || rf.Fix == "" {
				t.Fatalf("refusal %q", rf.Error())
			}
			if after := listing(t, f.root); !slices.Equal(after, before) {
				t.Fatalf("the root changed:\n%q\n%q", before, after)
			}
			if _, err := os.Lstat(filepath.Join(f.dir, RecordFile)); err == nil {
				t.Fatal("a refusal wrote a promotion record")
			}
		})
	}
}

// TestPromoteRaisesMismatch: a tampered staged product is raised as a
// product_mismatch finding, as manifest verify raises it, and the
// operation then has an open finding.
func TestPromoteRaisesMismatch(t *testing.T) {
	f := newFixture(t)
	must(t, os.WriteFile(filepath.Join(f.dir, "staged/out/result.json"), []byte(`{"ok":false}`+"\n"), 0o644))
	res, err := Promote(f.request(t, "out/result.json", "result.json", nil))
	if rf, ok := err.(*Refusal); !ok || rf.Rule != RuleStagedMismatch || res == nil || res.Raised.Findings != 1 {
		t.Fatalf("Promote = %+v, %v", res, err)
	}
	a, _, err := events.ReadAttention(f.st, opID)
	if err != nil || len(a.Open()) != 1 || a.Open()[0].Signature != "product_mismatch" {
		t.Fatalf("attention %+v, %v", a, err)
	}
}

// TestPlaceCopyMismatch: what the copy hashed is checked against the
// record before the rename; a difference leaves nothing at the
// destination, not even the temporary.
func TestPlaceCopyMismatch(t *testing.T) {
	f := newFixture(t)
	pr := f.product("out/result.json")
	pr.SHA256 = strings.Repeat("00", 32)
	_, err := place(f.dir, &pr, Target{Root: f.root, Rel: "result.json"}, false)
	if rf, ok := err.(*Refusal); !ok || rf.Rule != RuleCopyMismatch {
		t.Fatalf("place: %v", err)
	}
	tree := f.product("out/tree")
	tree.Entries = tree.Entries[:len(tree.Entries)-1] // the symlink is not recorded
	if _, err := place(f.dir, &tree, Target{Root: f.root, Rel: "tool"}, true); err == nil {
		t.Fatal("a tree with an entry the record lacks was placed")
	}
	if ents, _ := os.ReadDir(f.root); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

// TestPlaceExecutableStaged: a staged file with an execute bit is not
// placed without a consumer contract, whatever the record says.
func TestPlaceExecutableStaged(t *testing.T) {
	f := newFixture(t)
	must(t, os.Chmod(filepath.Join(f.dir, "staged/out/result.json"), 0o755))
	pr := f.product("out/result.json")
	if _, err := place(f.dir, &pr, Target{Root: f.root, Rel: "result.json"}, false); err == nil || !strings.Contains(err.Error(), RuleExecutable) {
		t.Fatalf("place: %v", err)
	}
	if ents, _ := os.ReadDir(f.root); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}
