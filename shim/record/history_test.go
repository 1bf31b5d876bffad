package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gensee/gensee/spec"
)

const cmdDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func opID(i int) string { return fmt.Sprintf("%032x", i+1) }

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestHistoryNewestFirst(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	if refs, err := st.History(cmdDigest, spec.MaxHistoryRefs); err != nil || refs != nil {
		t.Fatalf("no history: %v, %v", refs, err)
	}
	for i := range 3 {
		if err := st.AppendHistory(cmdDigest, opID(i), []byte(fmt.Sprintf("manifest %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	refs, err := st.History(cmdDigest, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []spec.HistoryRef{{OperationID: opID(2), ManifestSHA256: sum([]byte("manifest 2"))}, {OperationID: opID(1), ManifestSHA256: sum([]byte("manifest 1"))}}
	if fmt.Sprint(refs) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", refs, want)
	}
	p := filepath.Join(st.Dir, "history", strings.TrimPrefix(cmdDigest, "sha256:")+".jsonl")
	for path, mode := range map[string]os.FileMode{p: 0o600, filepath.Dir(p): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, mode)
		}
	}
	other := "sha256:" + strings.Repeat("f", 64)
	if refs, _ := st.History(other, 16); refs != nil {
		t.Errorf("another command's history: %v", refs)
	}
}

func TestHistoryKeepsTheNewest(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	for i := range HistoryKeep*2 + 5 {
		if err := st.AppendHistory(cmdDigest, opID(i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		p, _ := st.historyPath(cmdDigest)
		data, _ := os.ReadFile(p)
		if n := bytes.Count(data, []byte{'\n'}); n > HistoryKeep || n != min(i+1, HistoryKeep) {
			t.Fatalf("after %d appends the history has %d lines", i+1, n)
		}
	}
	refs, err := st.History(cmdDigest, 1000)
	if err != nil || len(refs) != HistoryKeep || refs[0].OperationID != opID(HistoryKeep*2+4) || refs[HistoryKeep-1].OperationID != opID(HistoryKeep+5) {
		t.Fatalf("history %d refs (%v), first %v", len(refs), err, refs[0])
	}
}

// TestHistoryConcurrent: writers of the same digest lose no line (up to
// the bound) and tear none.
func TestHistoryConcurrent(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if err := st.AppendHistory(cmdDigest, opID(i), []byte{byte(i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	refs, err := st.History(cmdDigest, 1000)
	if err != nil || len(refs) != 40 {
		t.Fatalf("%d refs after 40 concurrent appends (%v)", len(refs), err)
	}
}

func TestHistorySkipsDamage(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	if err := st.AppendHistory(cmdDigest, opID(0), []byte("a")); err != nil {
		t.Fatal(err)
	}
	p, _ := st.historyPath(cmdDigest)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// junk, a duplicate, a bad id, then a torn line
	f.WriteString("junk\n" + `{"operation_id":"` + opID(0) + `","manifest_sha256":"` + sum([]byte("a")) + `"}` + "\n" +
		`{"operation_id":"../x","manifest_sha256":"` + sum(nil) + `"}` + "\n" + `{"operation_id":"` + opID(9))
	f.Close()
	if refs, err := st.History(cmdDigest, 16); err != nil || len(refs) != 1 || refs[0].OperationID != opID(0) {
		t.Fatalf("history %v (%v)", refs, err)
	}
	// The next append rewrites the file without the torn line.
	if err := st.AppendHistory(cmdDigest, opID(1), []byte("b")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if n := bytes.Count(data, []byte{'\n'}); n != 3 || bytes.Contains(data, []byte("junk")) || !bytes.HasSuffix(data, []byte("\"}\n")) {
		t.Fatalf("rewritten history:\n%s", data)
	}
	if refs, _ := st.History(cmdDigest, 16); len(refs) != 2 || refs[0].OperationID != opID(1) {
		t.Fatalf("history %v", refs)
	}
}

func TestHistoryRefusesBadInput(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	for _, d := range []string{"", "sha256:../../etc/passwd", "sha256:" + strings.Repeat("A", 64), strings.Repeat("a", 64)} {
		if err := st.AppendHistory(d, opID(0), nil); err == nil {
			t.Errorf("AppendHistory(%q) indexed", d)
		}
		if _, err := st.History(d, 1); err == nil {
			t.Errorf("History(%q) read", d)
		}
	}
	if err := st.AppendHistory(cmdDigest, "not-an-id", nil); err == nil {
		t.Error("a malformed operation id was indexed")
	}
	// A symlink in the history file's place is never followed.
	p, _ := st.historyPath(cmdDigest)
	os.MkdirAll(filepath.Dir(p), 0o700)
	target := filepath.Join(st.Dir, "target")
	os.WriteFile(target, nil, 0o600)
	os.Symlink(target, p)
	if err := st.AppendHistory(cmdDigest, opID(0), nil); err == nil {
		t.Error("appended through a symlink")
	}
	if _, err := st.History(cmdDigest, 1); err == nil {
		t.Error("read through a symlink")
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("the symlink's target was written: %q", b)
	}
}

func TestWriteJSONBytes(t *testing.T) {
	st := Store{Dir: t.TempDir()}
	id := opID(0)
	if _, err := st.CreateOperation(id, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	b, err := st.WriteJSONBytes(id, ManifestFile, map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := st.OperationDir(id)
	if disk, _ := os.ReadFile(filepath.Join(dir, ManifestFile)); !bytes.Equal(disk, b) {
		t.Fatalf("wrote %q, returned %q", disk, b)
	}
}
