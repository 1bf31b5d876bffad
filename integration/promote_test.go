package integration

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/promote"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// resultSchema is what the workload's result must satisfy.
const resultSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["ok", "n"],
  "additionalProperties": false,
  "properties": {"ok": {"const": true}, "n": {"type": "integer", "minimum": 1}}
}`

// promoteEnv is a private containerd whose catalog lists two verifiers:
// json-schema (structured results) and broad (structured results and blob
// sets), and an operator config with one promotion root.
type promoteEnv struct {
	*env
	root             string // the promotion root
	verifierKey      ed25519.PrivateKey
	verifierKeyFile  string
	broadKey         ed25519.PrivateKey
	schema, otherKey string // files
}

func startPromoteEnv(t *testing.T) *promoteEnv {
	t.Helper()
	vk, bk := newKey(t), newKey(t)
	cat := catalogOf([]spec.Contract{productsContract()}, selector("it-promote", map[string]string{"build": "products"}, "products"))
	cat.Verifiers = []spec.Verifier{
		{ID: "json-schema", PublicKey: hex.EncodeToString(vk.Public().(ed25519.PublicKey)), Classes: []string{spec.ClassStructuredResult}, MaxLifetime: "1h"},
		{ID: "broad", PublicKey: hex.EncodeToString(bk.Public().(ed25519.PublicKey)), Classes: []string{spec.ClassStructuredResult, spec.ClassBlobSet}, MaxLifetime: "1h"},
	}
	e := startEnv(t, cat)
	p := &promoteEnv{env: e, root: filepath.Join(e.dir, "promoted"), verifierKey: vk, broadKey: bk}
	must(t, os.MkdirAll(p.root, 0o755))
	e.writeOperatorConfig("promotion_roots = [\"" + p.root + "\"]\n")
	keys := filepath.Join(e.dir, "keys")
	must(t, os.MkdirAll(keys, 0o700))
	p.verifierKeyFile = filepath.Join(keys, "verifier-private-key.hex")
	must(t, os.WriteFile(p.verifierKeyFile, []byte(spec.FormatPrivateKeyHex(vk)), 0o600))
	p.otherKey = filepath.Join(keys, "other-private-key.hex")
	must(t, os.WriteFile(p.otherKey, []byte(spec.FormatPrivateKeyHex(newKey(t))), 0o600))
	p.schema = filepath.Join(e.dir, "result.schema.json")
	must(t, os.WriteFile(p.schema, []byte(resultSchema), 0o644))
	return p
}

// gensee runs the CLI with the test's operator config.
func (p *promoteEnv) gensee(args ...string) (string, int) {
	p.t.Helper()
	out, err := exec.Command(filepath.Join(p.bin, "gensee"), append(args, "--config", p.cfgPath)...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	must(p.t, err)
	return string(out), 0
}

// produce runs a container that writes body as its structured result and
// returns its operation id.
func (p *promoteEnv) produce(id, body string) string {
	p.t.Helper()
	script := "mkdir -p /workspace/out/blobs && printf '%s' '" + body + "' > /workspace/out/result.json && echo a > /workspace/out/blobs/a.txt"
	if out, code := p.run("it-promote", id, nil, "/bin/sh", "-c", script); code != 0 {
		p.t.Fatalf("%s: exit %d\n%s", id, code, out)
	}
	m := p.manifest("it-promote", id)
	if m.Gate.Verdict != spec.VerdictPass {
		p.t.Fatalf("%s: gate %s %+v", id, m.Gate.Verdict, m.Gate.Violations)
	}
	return p.operation("it-promote", id)
}

// verify runs gensee verify json-schema on op's result with key file key
// and returns the receipt's path.
func (p *promoteEnv) verify(op, name, key string, extra ...string) string {
	p.t.Helper()
	out := filepath.Join(p.dir, name)
	args := append([]string{"verify", "json-schema", "--schema", p.schema, "--key", key, "--operation", op, "--slot", "out/result.json", "--out", out}, extra...)
	if text, code := p.gensee(args...); code != 0 {
		p.t.Fatalf("verify json-schema: exit %d\n%s", code, text)
	}
	return out
}

// craft signs a receipt for op's product at slot (the manifest's record),
// edited, with key.
func (p *promoteEnv) craft(op, slot, name, verifier string, key ed25519.PrivateKey, edit func(*spec.Receipt)) string {
	p.t.Helper()
	var m spec.Manifest
	must(p.t, record.Store{Dir: p.state}.ReadJSON(op, record.ManifestFile, &m))
	pr := product(m, slot)
	now := time.Now().UTC().Truncate(time.Second)
	r := spec.Receipt{Schema: spec.SchemaReceipt, OperationID: op, Slot: slot, Class: pr.Class, ProductDigest: pr.Digest(),
		Verdict: spec.ReceiptPass, Verifier: verifier, VerifierVersion: "it/1", IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(30 * time.Minute)}
	if edit != nil {
		edit(&r)
	}
	payload, err := spec.CanonicalJSON(r)
	must(p.t, err)
	env, err := spec.SignEnvelope(spec.PayloadTypeReceipt, payload, key)
	must(p.t, err)
	b, err := json.Marshal(env)
	must(p.t, err)
	out := filepath.Join(p.dir, name)
	must(p.t, os.WriteFile(out, b, 0o644))
	return out
}

// listing is every path below the promotion root with its mode and, for
// files, content.
func (p *promoteEnv) listing() []string {
	p.t.Helper()
	var out []string
	must(p.t, filepath.Walk(p.root, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		line := strings.TrimPrefix(path, p.root) + " " + info.Mode().String()
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(path)
			line += " " + hexSum(b)
		}
		out = append(out, line)
		return nil
	}))
	return out
}

// refused promotes op's result to dest with receipt and requires the
// refusal rule with nothing written below the root nor in the records.
func (p *promoteEnv) refused(op, receipt, dest, rule string) {
	p.t.Helper()
	before := p.listing()
	_, existed := os.Lstat(dest)
	records, _ := promote.Records(record.Store{Dir: p.state}, op)
	out, code := p.gensee("promote", op, "--slot", "out/result.json", "--receipt", receipt, "--to", dest)
	if code != 1 || !strings.Contains(out, "promotion refused: "+rule+": ") {
		p.t.Fatalf("promote: exit %d, want 1 with rule %s\n%s", code, rule, out)
	}
	if after := p.listing(); !slices.Equal(before, after) {
		p.t.Fatalf("a refused promotion (%s) wrote below the root:\n%q\n%q", rule, before, after)
	}
	if _, err := os.Lstat(dest); err == nil && existed != nil {
		p.t.Fatalf("a refused promotion (%s) wrote %s", rule, dest)
	}
	if now, _ := promote.Records(record.Store{Dir: p.state}, op); len(now) != len(records) {
		p.t.Fatalf("a refused promotion (%s) was recorded", rule)
	}
}

// TestPromote: a real container's structured result is verified with
// gensee verify json-schema and promoted; the destination holds the staged
// bytes, the operation records the promotion, the manifest is unchanged
// and a re-run changes nothing. Then each refusal writes nothing: a
// tampered staged product, a wrong-key receipt, an expired one, one for
// another digest, one for another class, an operation with an open
// finding, and a destination outside the promotion roots (or through a
// symlink below one).
func TestPromote(t *testing.T) {
	p := startPromoteEnv(t)
	const body = `{"ok": true, "n": 3}`
	good := p.produce("good", body+"\n")
	receipt := p.verify(good, "good.receipt.json", p.verifierKeyFile)

	t.Run("promoted", func(t *testing.T) {
		manifest, err := os.ReadFile(p.stagedPath("it-promote", "good", "../manifest.json"))
		must(t, err)
		dest := filepath.Join(p.root, "good.json")
		out, code := p.gensee("promote", good, "--slot", "out/result.json", "--receipt", receipt, "--to", dest)
		if code != 0 || !strings.Contains(out, "promoted out/result.json of operation "+good+" to "+dest) {
			t.Fatalf("promote: exit %d\n%s", code, out)
		}
		got, err := os.ReadFile(dest)
		if err != nil || string(got) != body+"\n" {
			t.Fatalf("destination %q, %v", got, err)
		}
		if st, _ := os.Stat(dest); st.Mode().Perm() != 0o644 {
			t.Fatalf("destination mode %v, want the staged 0644", st.Mode())
		}
		after, err := os.ReadFile(p.stagedPath("it-promote", "good", "../manifest.json"))
		must(t, err)
		if string(after) != string(manifest) || p.manifest("it-promote", "good").Promoted {
			t.Fatal("promotion changed the manifest")
		}
		rs, err := promote.Records(record.Store{Dir: p.state}, good)
		if err != nil || len(rs) != 1 || rs[0].Destination != dest || rs[0].ProductDigest != "sha256:"+hexSum([]byte(body+"\n")) || rs[0].Verifier != "json-schema" {
			t.Fatalf("records %+v, %v", rs, err)
		}
		before := p.listing()
		if out, code := p.gensee("promote", good, "--slot", "out/result.json", "--receipt", receipt, "--to", dest); code != 0 || !strings.Contains(out, "nothing changed") {
			t.Fatalf("re-run: exit %d\n%s", code, out)
		}
		if rs, _ := promote.Records(record.Store{Dir: p.state}, good); len(rs) != 1 || !slices.Equal(before, p.listing()) {
			t.Fatal("the re-run changed something")
		}
		if out, code := p.gensee("manifest", "show", "--operation", good); code != 0 || !strings.Contains(out, "promotions (promotions.jsonl") || !strings.Contains(out, dest) {
			t.Fatalf("manifest show: exit %d\n%s", code, out)
		}
	})

	t.Run("blob set as one unit", func(t *testing.T) {
		r := p.craft(good, "out/blobs", "blobs.receipt.json", "broad", p.broadKey, nil)
		dest := filepath.Join(p.root, "blobs")
		if out, code := p.gensee("promote", good, "--slot", "out/blobs", "--receipt", r, "--to", dest); code != 0 {
			t.Fatalf("promote: exit %d\n%s", code, out)
		}
		if b, err := os.ReadFile(filepath.Join(dest, "a.txt")); err != nil || string(b) != "a\n" {
			t.Fatalf("blobs/a.txt %q, %v", b, err)
		}
		if ents, _ := os.ReadDir(p.root); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), ".gensee-promote-") }) {
			t.Fatalf("a temporary is left in the root: %v", ents)
		}
	})

	t.Run("tampered staged product", func(t *testing.T) {
		op := p.produce("tampered", body+"\n")
		r := p.verify(op, "tampered.receipt.json", p.verifierKeyFile)
		must(t, os.WriteFile(p.stagedPath("it-promote", "tampered", "out/result.json"), []byte(`{"ok": true, "n": 4}`+"\n"), 0o644))
		p.refused(op, r, filepath.Join(p.root, "tampered.json"), promote.RuleStagedMismatch)
		if a, ok := p.attention("it-promote", "tampered"); !ok || len(a.Open()) != 1 || a.Open()[0].Signature != "product_mismatch" {
			t.Fatalf("attention %+v: want the mismatch raised", a)
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		r := p.verify(good, "wrongkey.receipt.json", p.otherKey)
		p.refused(good, r, filepath.Join(p.root, "wrongkey.json"), promote.RuleReceiptSignature)
	})

	t.Run("expired", func(t *testing.T) {
		r := p.verify(good, "expired.receipt.json", p.verifierKeyFile, "--ttl", "1s")
		time.Sleep(2 * time.Second) // past its expires_at, on the clock gensee promote reads
		p.refused(good, r, filepath.Join(p.root, "expired.json"), promote.RuleReceiptExpired)
	})

	t.Run("another digest", func(t *testing.T) {
		r := p.craft(good, "out/result.json", "digest.receipt.json", "json-schema", p.verifierKey, func(r *spec.Receipt) {
			r.ProductDigest = "sha256:" + hexSum([]byte(`{"ok": true, "n": 5}`+"\n"))
		})
		p.refused(good, r, filepath.Join(p.root, "digest.json"), promote.RuleReceiptBinding)
		// A receipt for another operation's identical-looking result is for another product too.
		other := p.produce("other", `{"ok": true, "n": 7}`+"\n")
		p.refused(good, p.verify(other, "other.receipt.json", p.verifierKeyFile), filepath.Join(p.root, "other.json"), promote.RuleReceiptBinding)
	})

	t.Run("another class", func(t *testing.T) {
		asBlobSet := func(r *spec.Receipt) { r.Class = spec.ClassBlobSet }
		// json-schema may not judge a blob set at all.
		p.refused(good, p.craft(good, "out/result.json", "class1.receipt.json", "json-schema", p.verifierKey, asBlobSet),
			filepath.Join(p.root, "class1.json"), promote.RuleVerifierClass)
		// broad may, but this product is a structured result.
		p.refused(good, p.craft(good, "out/result.json", "class2.receipt.json", "broad", p.broadKey, asBlobSet),
			filepath.Join(p.root, "class2.json"), promote.RuleReceiptBinding)
	})

	t.Run("open finding", func(t *testing.T) {
		op := p.produce("flagged", body+"\n")
		r := p.verify(op, "flagged.receipt.json", p.verifierKeyFile)
		// A finding as the operator sees it: raised on the record, listed by gensee attention list.
		_, err := events.RaiseAttention(record.Store{Dir: p.state}, op, spec.Finding{Signature: "table_tampered",
			Detail: "the operation's table changed while the task ran", At: time.Now().UTC()})
		must(t, err)
		if out, _ := p.gensee("attention", "list"); !strings.Contains(out, op) {
			t.Fatalf("attention list does not show the finding:\n%s", out)
		}
		dest := filepath.Join(p.root, "flagged.json")
		p.refused(op, r, dest, promote.RuleOpenFinding)
		if out, code := p.gensee("attention", "clear", op, "--note", "the test looked"); code != 0 {
			t.Fatalf("attention clear: exit %d\n%s", code, out)
		}
		if out, code := p.gensee("promote", op, "--slot", "out/result.json", "--receipt", r, "--to", dest); code != 0 {
			t.Fatalf("promote once cleared: exit %d\n%s", code, out)
		}
	})

	t.Run("outside the promotion roots", func(t *testing.T) {
		outside := filepath.Join(p.dir, "elsewhere")
		must(t, os.MkdirAll(outside, 0o755))
		p.refused(good, receipt, filepath.Join(outside, "good.json"), promote.RuleOutsideRoots)
		p.refused(good, receipt, p.root, promote.RuleOutsideRoots)
		// Below the root, but through a symlink out of it: never followed.
		must(t, os.Symlink(outside, filepath.Join(p.root, "escape")))
		defer os.Remove(filepath.Join(p.root, "escape"))
		p.refused(good, receipt, filepath.Join(p.root, "escape", "good.json"), promote.RuleDestParent)
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("written through the symlink: %v", ents)
		}
	})
}
