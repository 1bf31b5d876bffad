package record

import (
	"os"
	"path/filepath"
	"testing"
)

// Both writers replace the file whole and leave no temp file behind.
func TestWriteFileAtomicAndReplaceFile(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{
		"WriteFileAtomic": WriteFileAtomic, "ReplaceFile": ReplaceFile,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f.json")
			for _, data := range []string{"old, longer content", "new"} {
				if err := write(p, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(p)
				if err != nil || string(got) != data {
					t.Fatalf("read %q, %v; want %q", got, err, data)
				}
			}
			fi, err := os.Stat(p)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Fatalf("%d entries in the dir, want 1 (no temp file left)", len(ents))
			}
		})
	}
}
