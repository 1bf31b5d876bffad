package promote

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/verify"
	"github.com/gensee/gensee/spec"
)

const opID = "00112233445566778899aabbccddeeff"

var now = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)

func key(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

func pubHex(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }

// testCatalog has one contract (also the consumer envelope) and two
// verifiers: json-schema (key 1) for structured results, trees (key 2)
// for directory trees and patches.
func testCatalog() *spec.Catalog {
	ct := spec.Contract{ID: "run-tool", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}}
	return &spec.Catalog{
		Schema: spec.SchemaCatalog, Version: 7, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(24 * time.Hour),
		Contracts: map[string]spec.Contract{ct.ID: ct},
		Selectors: []spec.Selector{{ID: "s", Match: spec.SelectorMatch{ContainerdNamespace: "ns"}, SafeDefault: ct.ID}},
		Verifiers: []spec.Verifier{
			{ID: "json-schema", PublicKey: pubHex(key(1)), Classes: []string{spec.ClassStructuredResult}, MaxLifetime: "1h"},
			{ID: "trees", PublicKey: pubHex(key(2)), Classes: []string{spec.ClassDirectoryTree, spec.ClassWorkspacePatch}, MaxLifetime: "24h"},
		},
	}
}

func resultRecord() spec.ProductRecord {
	return spec.ProductRecord{Class: spec.ClassStructuredResult, Slot: "out/result.json", Verdict: spec.VerdictPass, Bytes: 12,
		SHA256: strings.Repeat("ab", 32), Staged: "staged/out/result.json",
		Entries: []spec.EntryRecord{{Path: "out/result.json", Type: "file", Mode: "0644", Size: 12, SHA256: strings.Repeat("ab", 32)}}}
}

func receiptFor(pr spec.ProductRecord, verifier string) spec.Receipt {
	return spec.Receipt{Schema: spec.SchemaReceipt, OperationID: opID, Slot: pr.Slot, Class: pr.Class, ProductDigest: pr.Digest(),
		Verdict: spec.ReceiptPass, Verifier: verifier, VerifierVersion: "test/1", IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(30 * time.Minute)}
}

func sign(t *testing.T, r spec.Receipt, k ed25519.PrivateKey) []byte {
	t.Helper()
	payload, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	env, err := spec.SignEnvelope(spec.PayloadTypeReceipt, payload, k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(env)
	return b
}

// wantRule checks a refusal's rule (or none), and that its message and
// fix are both there.
func wantRule(t *testing.T, rf *Refusal, rule string) {
	t.Helper()
	switch {
	case rule == "" && rf != nil:
		t.Fatalf("refused: %v", rf)
	case rule == "":
	case rf == nil:
		t.Fatalf("accepted, want rule %s", rule)
	case rf.Rule != rule:
		t.Fatalf("rule %s (%v), want %s", rf.Rule, rf, rule)
	case rf.Message == "" || rf.Fix == "":
		t.Fatalf("refusal without message or fix: %+v", rf)
	}
}

func TestCheckRoot(t *testing.T) {
	wantRule(t, CheckRoot(0), "")
	wantRule(t, CheckRoot(1000), RuleNotRoot)
}

func TestCheckDestination(t *testing.T) {
	roots := []string{"/srv/promoted", "/srv/promoted/deep", "/var/lib/artifacts"}
	for _, c := range []struct {
		dest  string
		roots []string
		rule  string
		want  Target
	}{
		{"/srv/promoted/result.json", roots, "", Target{"/srv/promoted", "result.json"}},
		{"/srv/promoted/a/b/result.json", roots, "", Target{"/srv/promoted", "a/b/result.json"}},
		{"/srv/promoted/deep/x", roots, "", Target{"/srv/promoted/deep", "x"}}, // the longest root wins
		{"/var/lib/artifacts/t", roots, "", Target{"/var/lib/artifacts", "t"}},
		{"/srv/promoted", roots, RuleOutsideRoots, Target{}}, // a root itself
		{"/srv/promotedX/a", roots, RuleOutsideRoots, Target{}},
		{"/etc/passwd", roots, RuleOutsideRoots, Target{}},
		{"/srv/promoted/../../etc/passwd", roots, RuleOutsideRoots, Target{}},
		{"/srv/promoted/a/", roots, RuleOutsideRoots, Target{}},
		{"srv/promoted/a", roots, RuleOutsideRoots, Target{}},
		{"/srv/promoted/a", nil, RuleNoRoots, Target{}},
	} {
		got, rf := CheckDestination(c.dest, c.roots)
		wantRule(t, rf, c.rule)
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.dest, got, c.want)
		}
	}
	if d := (Target{"/srv/promoted", "a/b"}).Dest(); d != "/srv/promoted/a/b" {
		t.Fatal(d)
	}
}

func TestCheckReceipt(t *testing.T) {
	pr := resultRecord()
	tree := spec.ProductRecord{Class: spec.ClassDirectoryTree, Slot: "out/tree", TreeDigest: "sha256:" + strings.Repeat("cd", 32)}
	for _, c := range []struct {
		name string
		edit func(*spec.Receipt)
		key  ed25519.PrivateKey
		rule string
	}{
		{"valid", nil, key(1), ""},
		{"wrong key", nil, key(9), RuleReceiptSignature},
		{"another verifier's key", nil, key(2), RuleReceiptSignature},
		{"class not judged", func(r *spec.Receipt) { *r = receiptFor(tree, "json-schema") }, key(1), RuleVerifierClass},
		{"expired", func(r *spec.Receipt) { r.IssuedAt, r.ExpiresAt = now.Add(-time.Hour), now }, key(1), RuleReceiptExpired},
		{"issued in the future", func(r *spec.Receipt) { r.IssuedAt, r.ExpiresAt = now.Add(5*time.Minute), now.Add(10*time.Minute) }, key(1), RuleReceiptEarly},
		{"issued within the skew", func(r *spec.Receipt) { r.IssuedAt, r.ExpiresAt = now.Add(time.Minute), now.Add(10*time.Minute) }, key(1), ""},
		{"lifetime over the verifier's", func(r *spec.Receipt) { r.ExpiresAt = r.IssuedAt.Add(61 * time.Minute) }, key(1), RuleReceiptLifetime},
		{"lifetime exactly the verifier's", func(r *spec.Receipt) { r.ExpiresAt = r.IssuedAt.Add(time.Hour) }, key(1), ""},
		{"fail verdict", func(r *spec.Receipt) { r.Verdict = spec.ReceiptFail }, key(1), RuleReceiptVerdict},
		{"invalid payload", func(r *spec.Receipt) { r.Slot = "../x" }, key(1), RuleReceiptFormat},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := receiptFor(pr, "json-schema")
			if c.edit != nil {
				c.edit(&r)
			}
			o, rf := CheckReceipt(testCatalog(), sign(t, r, c.key), now)
			wantRule(t, rf, c.rule)
			if c.rule == "" && (o.Verifier.ID != "json-schema" || o.Receipt.Slot != r.Slot) {
				t.Fatalf("opened %+v", o)
			}
		})
	}
	_, rf := CheckReceipt(testCatalog(), []byte(`{"payloadType":"x"}`), now)
	wantRule(t, rf, RuleReceiptFormat)
	env, _ := spec.SignEnvelope(spec.PayloadTypeInference, []byte("{}"), key(1))
	b, _ := json.Marshal(env)
	_, rf = CheckReceipt(testCatalog(), b, now)
	wantRule(t, rf, RuleReceiptFormat)
	noVerifiers := testCatalog()
	noVerifiers.Verifiers = nil
	_, rf = CheckReceipt(noVerifiers, sign(t, receiptFor(pr, "json-schema"), key(1)), now)
	wantRule(t, rf, RuleReceiptSignature)
}

func TestCheckBinding(t *testing.T) {
	failed := spec.ProductRecord{Class: spec.ClassBlob, Slot: "out/bad.bin", Verdict: spec.VerdictFail}
	manifest := func() *spec.Manifest {
		return &spec.Manifest{OperationID: opID, Products: []spec.ProductRecord{resultRecord(), failed}}
	}
	for _, c := range []struct {
		name string
		slot string
		edit func(*spec.Receipt, *spec.Manifest)
		rule string
	}{
		{"bound", "out/result.json", nil, ""},
		{"another operation", "out/result.json", func(r *spec.Receipt, _ *spec.Manifest) { r.OperationID = strings.Repeat("f", 32) }, RuleReceiptBinding},
		{"another slot", "out/result.json", func(r *spec.Receipt, _ *spec.Manifest) { r.Slot = "out/other.json" }, RuleReceiptBinding},
		{"another class", "out/result.json", func(r *spec.Receipt, _ *spec.Manifest) { r.Class = spec.ClassBlob }, RuleReceiptBinding},
		{"another digest", "out/result.json", func(r *spec.Receipt, _ *spec.Manifest) { r.ProductDigest = "sha256:" + strings.Repeat("00", 32) }, RuleReceiptBinding},
		{"no such slot", "out/none.json", nil, RuleProduct},
		{"failed product", "out/bad.bin", nil, RuleProduct},
		{"manifest of another operation", "out/result.json", func(_ *spec.Receipt, m *spec.Manifest) { m.OperationID = "x" }, RuleManifest},
		{"no digest recorded", "out/result.json", func(_ *spec.Receipt, m *spec.Manifest) { m.Products[0].SHA256 = "" }, RuleManifest},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, m := receiptFor(resultRecord(), "json-schema"), manifest()
			if c.edit != nil {
				c.edit(&r, m)
			}
			pr, rf := CheckBinding(&r, opID, c.slot, m)
			wantRule(t, rf, c.rule)
			if c.rule == "" && pr.Slot != c.slot {
				t.Fatalf("record %+v", pr)
			}
		})
	}
}

func TestCheckFindings(t *testing.T) {
	open := spec.Finding{Signature: "table_tampered", At: now}
	cleared := spec.Finding{Signature: "deny_then_reach", At: now, Cleared: &spec.Clearing{By: "uid 0", At: now}}
	wantRule(t, CheckFindings(opID, spec.Attention{}), "")
	wantRule(t, CheckFindings(opID, spec.Attention{Findings: []spec.Finding{cleared}}), "")
	rf := CheckFindings(opID, spec.Attention{Findings: []spec.Finding{cleared, open}})
	wantRule(t, rf, RuleOpenFinding)
	if !strings.Contains(rf.Message, "table_tampered") || strings.Contains(rf.Message, "deny_then_reach") || !strings.Contains(rf.Fix, "attention clear "+opID) {
		t.Fatalf("refusal %v", rf)
	}
}

func TestCheckStaged(t *testing.T) {
	wantRule(t, CheckStaged(opID, &verify.Result{StagedReport: &gate.StagedReport{}}), "")
	bad := &verify.Result{StagedReport: &gate.StagedReport{Mismatches: []gate.Mismatch{
		{Slot: "out/result.json", Path: "staged/out/result.json", What: gate.MismatchSHA256, Expected: strings.Repeat("ab", 32), Actual: strings.Repeat("cd", 32)},
	}}}
	rf := CheckStaged(opID, bad)
	wantRule(t, rf, RuleStagedMismatch)
	if !strings.Contains(rf.Message, "staged/out/result.json: sha256") {
		t.Fatalf("refusal %v", rf)
	}
}

func TestCheckExecutables(t *testing.T) {
	tool := spec.ProductRecord{Class: spec.ClassDirectoryTree, Slot: "out/tool", Entries: []spec.EntryRecord{
		{Path: "out/tool/bin", Type: "dir", Mode: "0755"},
		{Path: "out/tool/bin/run", Type: "file", Mode: "0750"},
		{Path: "out/tool/README", Type: "file", Mode: "0644"},
		{Path: "out/tool/ln", Type: "symlink", Mode: "0777"},
	}}
	if got := Executables(&tool); len(got) != 1 || got[0] != "out/tool/bin/run" {
		t.Fatalf("executables %q, want only the file with an execute bit", got)
	}
	weird := spec.ProductRecord{Entries: []spec.EntryRecord{{Path: "x", Type: "file", Mode: "rwx"}}}
	if len(Executables(&weird)) != 1 {
		t.Fatal("a mode that does not parse is not counted as executable")
	}
	inert := resultRecord()
	cat := testCatalog()
	for _, c := range []struct {
		name     string
		pr       *spec.ProductRecord
		consumer string
		rule     string
	}{
		{"no executable", &inert, "", ""},
		{"executable, no consumer", &tool, "", RuleExecutable},
		{"executable, consumer in the catalog", &tool, "run-tool", ""},
		{"executable, consumer not in the catalog", &tool, "nope", RuleConsumer},
		{"no executable, consumer in the catalog", &inert, "run-tool", ""},
		{"no executable, consumer not in the catalog", &inert, "nope", RuleConsumer},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := receiptFor(*c.pr, "trees")
			r.ConsumerContract = c.consumer
			wantRule(t, CheckExecutables(c.pr, &r, cat), c.rule)
		})
	}
}
