package hostrun

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReserveSpace: the reserve holds reserveSize bytes of blocks until it
// is released; a second reserve in the same dir is refused; releasing
// twice is fine.
func TestReserveSpace(t *testing.T) {
	dir := t.TempDir()
	if err := reserveSpace(dir); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, reserveFile), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 < reserveSize {
		t.Errorf("the reserve holds %d bytes of blocks, want %d", st.Blocks*512, reserveSize)
	}
	if err := reserveSpace(dir); err == nil {
		t.Error("a second reserve in the same dir was made")
	}
	for range 2 {
		if err := releaseSpace(dir)(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, reserveFile)); !os.IsNotExist(err) {
		t.Errorf("the reserve is still there: %v", err)
	}
}
