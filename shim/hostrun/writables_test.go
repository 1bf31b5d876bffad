package hostrun

import (
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/hostrun/inner"
)

// TestWritables: the staged workspace says its overlay is volatile only
// when the wrapper reported the flag taken (a kernel before 5.10 refuses
// it), and what that means for the command's syncs; the tmpfs follow.
func TestWritables(t *testing.T) {
	v := writables("/ws", []string{"/tmp"}, true)
	if len(v) != 2 || !strings.Contains(v[0], "volatile") || !strings.Contains(v[0], "fsync, fdatasync and syncfs there make nothing durable") || !strings.HasPrefix(v[1], "/tmp ") {
		t.Fatalf("volatile: %q", v)
	}
	if v := writables("/ws", nil, false); len(v) != 1 || strings.Contains(v[0], "volatile") {
		t.Fatalf("not volatile: %q", v)
	}
	if !slices.Contains(stagedOverlayOptions(), inner.OverlayVolatile) {
		t.Fatalf("the staged overlay does not ask for %s: %q", inner.OverlayVolatile, stagedOverlayOptions())
	}
}
