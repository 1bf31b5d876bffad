package cli

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/promote"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// promoteFixture is a host as gensee promote needs it: a trust anchor and
// a signed catalog (contrib's, with a verifier key of verify keygen's)
// in root-only directories, an operator config with a promotion root,
// and one finished operation with a staged structured result.
type promoteFixture struct {
	base, config, root, opDir, verifierKey, schema string
}

const promoteResult = `{"ok": true, "n": 3}` + "\n"

func newPromoteFixture(t *testing.T) *promoteFixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the trust anchor and the operator config must be root-owned, in root-only directories")
	}
	base, err := os.MkdirTemp("/var/lib", "gensee-cli-promote-") // never /tmp: the anchor check refuses it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	f := &promoteFixture{base: base, root: filepath.Join(base, "promoted")}
	etc := filepath.Join(base, "etc")
	for _, d := range []string{etc, f.root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	std().run(t, "verify", "keygen", "--out", filepath.Join(base, "keys")).want(t, ExitOK, []string{"verifiers[].public_key"}, nil)
	kp := pairIn(filepath.Join(base, "keys"), "verifier")
	f.verifierKey = kp.private
	vpub := strings.TrimSpace(string(readFile(t, kp.public)))

	pub, root, _ := ed25519.GenerateKey(rand.Reader)
	anchor := writeFile(t, etc, "anchor.hex", spec.FormatPublicKeyHex(pub))
	if err := os.Chmod(anchor, 0o400); err != nil {
		t.Fatal(err)
	}
	payload := string(readFile(t, contrib(t, "catalog.json")))
	i := strings.LastIndex(payload, strings.Repeat("0", 64)) // the verifier's placeholder key comes last
	payload = payload[:i] + vpub + payload[i+64:]
	env, err := spec.SignEnvelope(spec.PayloadTypeCatalog, []byte(payload), root)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(env)
	catalog := writeFile(t, etc, "catalog.signed.json", string(b))
	state := filepath.Join(base, "state")
	f.config = writeFile(t, etc, "config.toml", "catalog = \""+catalog+"\"\ntrust_anchor = \""+anchor+"\"\nstate_dir = \""+state+"\"\npromotion_roots = [\""+f.root+"\"]\n")

	st := record.Store{Dir: state}
	if f.opDir, err = st.CreateOperation(fxOperation, fxNamespace, fxContainer); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.opDir, "staged/out/result.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Dir(p), "result.json", promoteResult)
	sum := hexOf([]byte(promoteResult))
	m := spec.Manifest{Schema: spec.SchemaManifest, OperationID: fxOperation, Namespace: fxNamespace, ContainerID: fxContainer,
		Gate: spec.GateResult{Verdict: spec.VerdictPass}, Products: []spec.ProductRecord{{
			Class: spec.ClassStructuredResult, Slot: "out/result.json", Verdict: spec.VerdictPass, Bytes: int64(len(promoteResult)),
			SHA256: sum, Staged: "staged/out/result.json",
			Entries: []spec.EntryRecord{{Path: "out/result.json", Type: "file", Mode: "0644", Size: int64(len(promoteResult)), SHA256: sum}},
		}}}
	if err := st.WriteJSON(fxOperation, record.ManifestFile, m); err != nil {
		t.Fatal(err)
	}
	f.schema = writeFile(t, base, "schema.json", `{"type":"object","required":["ok"],"properties":{"ok":{"const":true},"n":{"type":"integer"}}}`)
	return f
}

func (f *promoteFixture) run(t *testing.T, args ...string) result {
	t.Helper()
	return std().run(t, append(args, "--config", f.config)...)
}

// TestVerifyAndPromote: the reference verifier signs a receipt for the
// staged result, promote places it and records it, a re-run changes
// nothing, a failing receipt is refused; manifest show, its in-toto
// statements and ls show the promotion, and the manifest is unchanged.
func TestVerifyAndPromote(t *testing.T) {
	f := newPromoteFixture(t)
	receipt := filepath.Join(f.base, "receipt.json")
	f.run(t, "verify", "json-schema", "--schema", f.schema, "--key", f.verifierKey, "--operation", fxOperation,
		"--slot", "out/result.json", "--out", receipt).want(t, ExitOK, []string{"pass: out/result.json of operation " + fxOperation, receipt}, nil)
	manifest := readFile(t, filepath.Join(f.opDir, record.ManifestFile))

	dest := filepath.Join(f.root, "result.json")
	f.run(t, "promote", fxOperation, "--slot", "out/result.json", "--receipt", receipt, "--to", dest).want(t, ExitOK,
		[]string{"promoted out/result.json of operation " + fxOperation + " to " + dest, "recorded in"}, nil)
	if got := string(readFile(t, dest)); got != promoteResult {
		t.Fatalf("destination holds %q", got)
	}
	f.run(t, "promote", fxOperation, "--slot", "out/result.json", "--receipt", receipt, "--to", dest).want(t, ExitOK,
		[]string{"already holds out/result.json", "nothing changed"}, nil)
	if !bytes.Equal(manifest, readFile(t, filepath.Join(f.opDir, record.ManifestFile))) {
		t.Fatal("promotion changed the manifest")
	}

	// A schema the result breaks: a receipt that says fail, refused.
	strict := writeFile(t, f.base, "strict.json", `{"type":"object","required":["missing"]}`)
	failing := filepath.Join(f.base, "failing.json")
	f.run(t, "verify", "json-schema", "--schema", strict, "--key", f.verifierKey, "--operation", fxOperation,
		"--slot", "out/result.json", "--out", failing).want(t, ExitRefused, []string{"fail: out/result.json"}, []string{"missing property", "the receipt says fail"})
	f.run(t, "promote", fxOperation, "--slot", "out/result.json", "--receipt", failing, "--to", filepath.Join(f.root, "other.json")).want(t, ExitRefused,
		nil, []string{"gensee: promote: promotion refused: receipt_verdict: "})
	f.run(t, "promote", fxOperation, "--slot", "out/result.json", "--receipt", receipt, "--to", "/etc/gensee-promoted.json").want(t, ExitRefused,
		nil, []string{"destination_outside_roots"})
	if _, err := os.Lstat(filepath.Join(f.root, "other.json")); err == nil {
		t.Fatal("a refused promotion wrote its destination")
	}

	f.run(t, "manifest", "show", "--operation", fxOperation).want(t, ExitOK,
		[]string{"promoted: no", "promotions (promotions.jsonl", dest, "by json-schema", "uid 0"}, nil)
	r := f.run(t, "manifest", "show", "--operation", fxOperation, "--in-toto")
	r.want(t, ExitOK, nil, nil)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var stmts []inTotoStmt
	for {
		var s inTotoStmt
		if err := dec.Decode(&s); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("statements: %v\n%s", err, r.stdout)
		}
		stmts = append(stmts, s)
	}
	if len(stmts) != 2 || stmts[0].PredicateType != inTotoPredicateType || stmts[1].PredicateType != inTotoPromotionType ||
		len(stmts[1].Subject) != 1 || stmts[1].Subject[0].Name != dest || stmts[1].Subject[0].Digest["sha256"] != hexOf([]byte(promoteResult)) {
		t.Fatalf("statements %+v", stmts)
	}
	if p, err := spec.ParsePromotion(stmts[1].Predicate); err != nil || p.Destination != dest || p.Receipt == nil {
		t.Fatalf("promotion predicate %+v, %v", p, err)
	}

	r = f.run(t, "ls", "--json")
	var items []LsItem
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) != 1 || items[0].Promotions != 1 {
		t.Fatalf("ls --json %+v, %v", items, err)
	}
	f.run(t, "ls").want(t, ExitOK, []string{"PROMOTED"}, nil)

	r = f.run(t, "promote", fxOperation, "--slot", "out/result.json", "--receipt", receipt, "--to", filepath.Join(f.root, "copy.json"), "--json")
	r.want(t, ExitOK, nil, nil)
	var v PromoteView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || !v.Changed || !v.Recorded || v.Promotion.Destination != filepath.Join(f.root, "copy.json") {
		t.Fatalf("--json %+v, %v", v, err)
	}
	if ps, err := promote.Records(record.Store{Dir: filepath.Join(f.base, "state")}, fxOperation); err != nil || len(ps) != 2 {
		t.Fatalf("records %d, %v", len(ps), err)
	}
}

func TestPromoteUsage(t *testing.T) {
	std().run(t, "promote", fxOperation, "--slot", "s", "--receipt", "r").want(t, ExitUsage, nil, []string{"--to is required"})
	std().run(t, "verify", "json-schema", "--key", "k", "--slot", "s", "--operation", fxOperation).want(t, ExitUsage, nil, []string{"--schema is required"})
}
