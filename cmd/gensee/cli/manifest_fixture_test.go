package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

const (
	fxOperation = "0123456789abcdef0123456789abcdef"
	fxNamespace = "builds"
	fxContainer = "job-1"
)

// opFixture is a state dir holding one finished operation as the runtime
// lays it out, with an operator config pointing at it. sums holds the
// sha256 of every staged file, computed here from the bytes written, keyed
// by the in-toto subject name (slot, or slot/path in a directory product).
type opFixture struct {
	state, config, dir string
	m                  spec.Manifest
	sums               map[string]string
}

func hexOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// treeDigestOf is the documented tree digest (shim/gate.TreeDigest),
// written out again so the test does not trust the code it checks.
func treeDigestOf(slot string, entries []spec.EntryRecord) string {
	var lines []string
	for _, e := range entries {
		rel := strings.TrimPrefix(e.Path, slot+"/")
		lines = append(lines, rel+"\x00"+e.Type+"\x00"+e.Mode+"\x00"+strconv.FormatInt(e.Size, 10)+"\x00"+e.SHA256+"\n")
	}
	sort.Strings(lines)
	return "sha256:" + hexOf([]byte(strings.Join(lines, "")))
}

// newOpFixture needs root: the operator config must be root-owned, as the
// runtime requires.
func newOpFixture(t *testing.T) *opFixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the operator config must be root-owned")
	}
	fx := &opFixture{state: t.TempDir(), sums: map[string]string{}}
	fx.config = writeFile(t, t.TempDir(), "config.toml", "state_dir = \""+fx.state+"\"\n")
	store := record.Store{Dir: fx.state}
	dir, err := store.CreateOperation(fxOperation, fxNamespace, fxContainer)
	if err != nil {
		t.Fatal(err)
	}
	fx.dir = dir
	admission := map[string]any{"operation_id": fxOperation, "namespace": fxNamespace, "container_id": fxContainer}
	if err := store.WriteJSON(fxOperation, record.AdmissionFile, admission); err != nil {
		t.Fatal(err)
	}

	result := fx.stage(t, "out/result.json", `{"ok": true, "n": 3}`+"\n", 0o644)
	patch := fx.stage(t, "changes.patch", `{"op":"add","path":"src","type":"dir","mode":"0755"}`+"\n", 0o644)
	blobs := []spec.EntryRecord{
		fx.entry(t, "out/blobs", "a.txt", "a\n", "0644"),
		fx.entry(t, "out/blobs", "b.txt", "bb\n", "0640"),
	}
	tree := []spec.EntryRecord{
		fx.entry(t, "out/tree", "sub", "", "0755"),
		fx.entry(t, "out/tree", "sub/c.txt", "ccc", "0755"),
		fx.symlink(t, "out/tree", "link", "sub/c.txt"),
	}
	fx.m = spec.Manifest{
		Schema:            spec.SchemaManifest,
		OperationID:       fxOperation,
		Subject:           spec.Subject{InitPID: 4242, StartTime: 987654, CgroupPath: "/sys/fs/cgroup/builds/job-1", CgroupID: 77},
		Contract:          spec.ContractRef{ID: "ci-builds", Digest: "sha256:" + strings.Repeat("ab", 32)},
		CatalogVersion:    3,
		ObservationDigest: "sha256:" + strings.Repeat("cd", 32),
		CommandDigest:     "sha256:" + strings.Repeat("ef", 32),
		VolatileEnv:       []string{"HOSTNAME", "KUBERNETES_PORT"},
		Inference:         spec.InferenceSummary{SafeDefault: true, Reason: "low_confidence", Source: spec.InferenceFromAnalyzer, AnalyzerOutcome: spec.ConsultRejected},
		Deadlines: spec.Deadlines{Task: "10m", TaskExpiresAt: time.Date(2027, 1, 1, 12, 10, 0, 0, time.UTC),
			CatalogExpiresAt: time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)},
		Enforcement: spec.Enforcement{
			Network: spec.NetworkEnforcement{Mechanism: "nftables", Scope: "cgroupv2 /builds/job-1 (id 77), own netns",
				Mode: spec.NetworkAllowExact, Loopback: spec.LoopbackDeny, Table: "gensee_0123456789ab", TableRemoved: "deleted",
				Allow: []spec.AllowRule{{IP: "10.0.0.1", Proto: spec.ProtoTCP, Port: 443}, {IP: "fd00::53", Proto: spec.ProtoUDP, Port: 53}}},
			CapabilitiesRemoved: []string{"CAP_NET_RAW"},
		},
		Observation: spec.Observed{Counters: spec.Counters{AllowedPackets: 10, AllowedBytes: 840, DeniedPackets: 3, DeniedBytes: 180}},
		Products: []spec.ProductRecord{
			{Class: spec.ClassStructuredResult, Slot: "out/result.json", Verdict: spec.VerdictPass, Bytes: int64(len(result)),
				SHA256: hexOf([]byte(result)), Staged: "staged/out/result.json",
				Entries: []spec.EntryRecord{{Path: "out/result.json", Type: "file", Mode: "0644", Size: int64(len(result)), SHA256: hexOf([]byte(result))}}},
			{Class: spec.ClassBlobSet, Slot: "out/blobs", Verdict: spec.VerdictPass, Bytes: 5,
				TreeDigest: treeDigestOf("out/blobs", blobs), Staged: "staged/out/blobs", Entries: blobs},
			{Class: spec.ClassDirectoryTree, Slot: "out/tree", Verdict: spec.VerdictPass, Bytes: 3,
				TreeDigest: treeDigestOf("out/tree", tree), Staged: "staged/out/tree", Entries: tree},
			{Class: spec.ClassWorkspacePatch, Slot: "changes.patch", Verdict: spec.VerdictPass, Bytes: 0,
				SHA256: hexOf([]byte(patch)), Staged: "staged/changes.patch"},
			{Class: spec.ClassStructuredResult, Slot: "out/bad.json", Verdict: spec.VerdictFail, Bytes: 9,
				SHA256: hexOf([]byte(`{"ok": tru`))},
		},
		Gate: spec.GateResult{Verdict: spec.VerdictFail, Violations: []spec.Violation{
			{Slot: "out/bad.json", Path: "out/bad.json", Rule: "invalid_json", Detail: "unexpected end of JSON input"},
			{Path: "/workspace/evil\x1b[31m\nname", Rule: "bad_name", Detail: "name contains a newline"},
		}},
		Unclaimed: spec.Unclaimed{Count: 2, Digest: "sha256:" + strings.Repeat("12", 32)},
		Excluded:  spec.Excluded{Count: 1},
		Drained:   1,
	}
	fx.writeManifest(t)
	return fx
}

func (fx *opFixture) writeManifest(t *testing.T) {
	t.Helper()
	if err := (record.Store{Dir: fx.state}).WriteJSON(fxOperation, record.ManifestFile, fx.m); err != nil {
		t.Fatal(err)
	}
}

// staged is the absolute path of rel below staged/.
func (fx *opFixture) staged(rel string) string {
	return filepath.Join(fx.dir, record.StagedDir, filepath.FromSlash(rel))
}

func (fx *opFixture) stage(t *testing.T, slot, content string, perm os.FileMode) string {
	t.Helper()
	p := fx.staged(slot)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	fx.sums[slot] = hexOf([]byte(content))
	return content
}

// entry stages one file (or, with mode 0755 and no content at a path with
// no extension, a directory) of a directory product and returns its record,
// its path workspace-relative as the gate writes it.
func (fx *opFixture) entry(t *testing.T, slot, rel, content, mode string) spec.EntryRecord {
	t.Helper()
	if content == "" && filepath.Ext(rel) == "" {
		if err := os.MkdirAll(fx.staged(slot+"/"+rel), 0o755); err != nil {
			t.Fatal(err)
		}
		return spec.EntryRecord{Path: slot + "/" + rel, Type: "dir", Mode: mode}
	}
	fx.stage(t, slot+"/"+rel, content, 0o644)
	return spec.EntryRecord{Path: slot + "/" + rel, Type: "file", Mode: mode, Size: int64(len(content)), SHA256: hexOf([]byte(content))}
}

func (fx *opFixture) symlink(t *testing.T, slot, rel, target string) spec.EntryRecord {
	t.Helper()
	if err := os.Symlink(target, fx.staged(slot+"/"+rel)); err != nil {
		t.Fatal(err)
	}
	return spec.EntryRecord{Path: slot + "/" + rel, Type: "symlink", Mode: "0777", Size: int64(len(target)),
		SHA256: hexOf([]byte(target)), Target: target}
}

// run runs gensee with the fixture's config appended.
func (fx *opFixture) run(t *testing.T, args ...string) result {
	t.Helper()
	return std().run(t, append(args, "--config", fx.config)...)
}
