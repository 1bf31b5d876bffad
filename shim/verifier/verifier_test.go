package verifier

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

const opID = "00112233445566778899aabbccddeeff"

const schema = `{
  "type": "object",
  "required": ["ok", "n"],
  "additionalProperties": false,
  "properties": {"ok": {"const": true}, "n": {"type": "integer", "minimum": 1}}
}`

func sum(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

// staged is an operation directory with body staged at out/result.json
// and the manifest that records it.
func staged(t *testing.T, body string) (string, *spec.Manifest) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "staged/out/result.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &spec.Manifest{OperationID: opID, Products: []spec.ProductRecord{
		{Class: spec.ClassStructuredResult, Slot: "out/result.json", Verdict: spec.VerdictPass, Bytes: int64(len(body)), SHA256: sum(body), Staged: "staged/out/result.json"},
		{Class: spec.ClassStructuredResult, Slot: "out/bad.json", Verdict: spec.VerdictFail},
		{Class: spec.ClassBlob, Slot: "out/blob", Verdict: spec.VerdictPass, SHA256: sum(""), Staged: "staged/out/blob"},
	}}
	return dir, m
}

func TestFind(t *testing.T) {
	_, m := staged(t, "{}")
	if pr, err := Find(m, "out/result.json", spec.ClassStructuredResult); err != nil || pr.Slot != "out/result.json" {
		t.Fatalf("Find = %+v, %v", pr, err)
	}
	for slot, want := range map[string]string{"out/bad.json": "failed the gate", "out/blob": "is a blob", "out/none": "no product at slot"} {
		if _, err := Find(m, slot, spec.ClassStructuredResult); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", slot, err, want)
		}
	}
}

// TestRead: the bytes read are the ones the manifest records; a changed
// copy, a grown one and one reached through a symlink are refused.
func TestRead(t *testing.T) {
	body := `{"ok":true,"n":3}`
	dir, m := staged(t, body)
	pr := &m.Products[0]
	if b, err := Read(dir, pr); err != nil || string(b) != body {
		t.Fatalf("Read = %q, %v", b, err)
	}
	p := filepath.Join(dir, pr.Staged)
	os.WriteFile(p, []byte(`{"ok":true,"n":4}`), 0o644)
	if _, err := Read(dir, pr); !errors.Is(err, ErrStagedMismatch) {
		t.Fatalf("changed copy: %v", err)
	}
	os.WriteFile(p, []byte(body+" "), 0o644)
	if _, err := Read(dir, pr); err == nil {
		t.Fatal("a grown copy was read")
	}
	os.Remove(p)
	other := filepath.Join(t.TempDir(), "x")
	os.WriteFile(other, []byte(body), 0o644)
	os.Symlink(other, p)
	if _, err := Read(dir, pr); err == nil {
		t.Fatal("read through a symlink")
	}
	os.Remove(p)
	os.RemoveAll(filepath.Join(dir, "staged/out"))
	os.Symlink(filepath.Dir(other), filepath.Join(dir, "staged/out"))
	if _, err := Read(dir, pr); err == nil {
		t.Fatal("read through a symlinked directory")
	}
}

// TestReceiptOpens: a judgement's signed receipt opens under a catalog
// that lists the verifier, binding the verdict to the product's digest.
func TestReceiptOpens(t *testing.T) {
	_, m := staged(t, `{"ok":true,"n":3}`)
	pub, key, _ := ed25519.GenerateKey(nil)
	now := time.Date(2027, 3, 1, 12, 0, 0, 500, time.UTC)
	for _, problems := range [][]string{nil, {"/ok: want true"}} {
		j := Judgement{OperationID: opID, Product: &m.Products[0], Problems: problems, Verifier: "json-schema", Version: "gensee/dev",
			Criteria: "sha256:" + sum(schema), Consumer: "run-tool"}
		r, err := j.Receipt(now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		env, err := Sign(r, key)
		if err != nil {
			t.Fatal(err)
		}
		cat := &spec.Catalog{Verifiers: []spec.Verifier{{ID: "json-schema", PublicKey: hex.EncodeToString(pub), Classes: []string{spec.ClassStructuredResult}, MaxLifetime: "1h"}}}
		o, err := cat.OpenReceipt(env)
		if err != nil {
			t.Fatal(err)
		}
		got := o.Receipt
		if got.Verdict != j.Verdict() || got.ProductDigest != "sha256:"+m.Products[0].SHA256 || got.ConsumerContract != "run-tool" ||
			!got.IssuedAt.Equal(now.Truncate(time.Second)) || got.ExpiresAt.Sub(got.IssuedAt) != time.Hour {
			t.Fatalf("receipt %+v", got)
		}
	}
	if _, err := (Judgement{OperationID: "x", Product: &m.Products[0], Verifier: "v", Version: "1"}).Receipt(now, time.Hour); err == nil {
		t.Fatal("a receipt for a malformed operation id was made")
	}
}
