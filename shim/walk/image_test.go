package walk

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenImage reads the image side of entries in an overlay layout made
// of plain directories, from the layer that holds them, and refuses
// anything but a regular file (a FIFO in the image is never opened).
func TestOpenImage(t *testing.T) {
	base := t.TempDir()
	upper, top, bottom := filepath.Join(base, "u"), filepath.Join(base, "l0"), filepath.Join(base, "l1")
	for _, d := range []string{upper + "/d", top + "/d", bottom + "/d"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(upper+"/d/f", "upper")
	write(bottom+"/d/f", "bottom")
	write(upper+"/d/p", "upper")
	if err := unix.Mkfifo(top+"/d/p", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("up", upper+"/d/l"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("img", bottom+"/d/l"); err != nil {
		t.Fatal(err)
	}
	tree, err := Open(upper, Options{Overlay: true, Lowers: []string{top, bottom}})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	got := map[string]string{}
	err = tree.Walk(context.Background(), func(e *Entry) (bool, error) {
		switch e.Path {
		case "d/f":
			f, err := e.OpenImage()
			if err != nil {
				return false, err
			}
			defer f.Close()
			b, err := io.ReadAll(f.Reader())
			if err != nil {
				return false, err
			}
			if st, err := f.Restat(); err != nil || st.Size != 6 || f.Stat.Ino != e.Image.Stat.Ino {
				t.Errorf("image file stat %+v (%v)", st, err)
			}
			got[e.Path] = string(b)
		case "d/p":
			if _, err := e.OpenImage(); err == nil {
				t.Error("OpenImage opened a FIFO")
			}
		case "d/l":
			s, err := e.ImageReadlink()
			if err != nil {
				return false, err
			}
			got[e.Path] = s
			if _, err := e.OpenImage(); err == nil {
				t.Error("OpenImage opened a symlink")
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["d/f"] != "bottom" || got["d/l"] != "img" {
		t.Fatalf("image side read %q", got)
	}
}
