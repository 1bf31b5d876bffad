package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/cli.md from the command tree")

// TestDocsCurrent keeps docs/cli.md what the command tree generates.
func TestDocsCurrent(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "cli.md")
	var b bytes.Buffer
	writeMarkdown(&b, root())
	if *updateDocs {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; generate it: go test ./cmd/gensee/cli -run TestDocsCurrent -update-docs", err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Fatal("docs/cli.md is not what the command tree generates; regenerate it: go test ./cmd/gensee/cli -run TestDocsCurrent -update-docs")
	}
}
