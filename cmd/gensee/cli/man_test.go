package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManPages: gensee(1) and one page per leaf of the command tree, each
// a roff page with its own .TH, its flags and the exit codes.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteManPages(dir, "2026-01-02", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if want := len(leaves(root(), nil)) + 1; len(files) != want {
		t.Fatalf("%d pages, want %d", len(files), want)
	}
	b, err := os.ReadFile(filepath.Join(dir, "gensee.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leaves(root(), nil) {
		if !strings.Contains(string(b), `\fB`+roffEsc(manName(l.path))+`\fR(1)`) {
			t.Errorf("gensee.1 does not refer to %s(1)", manName(l.path))
		}
	}
	p, err := os.ReadFile(filepath.Join(dir, "gensee-manifest-show.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`.TH GENSEE\-MANIFEST\-SHOW 1 "2026-01-02" "gensee v1.2.3"`, `.B \-\-in\-toto`, ".SH EXIT STATUS"} {
		if !strings.Contains(string(p), want) {
			t.Errorf("gensee-manifest-show.1 lacks %q:\n%s", want, p)
		}
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "'") {
				t.Errorf("%s:%d: a line starting with ' is a roff control line: %q", f, i+1, line)
			}
		}
	}
}
