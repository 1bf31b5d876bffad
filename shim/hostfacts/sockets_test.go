package hostfacts

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindSocket(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a", "file"), nil, 0o644))
	if got, err := FindSocket(dir); err != nil || got != "" {
		t.Fatalf("no socket: %q %v", got, err)
	}
	sock := filepath.Join(dir, "a", "b", "s.sock")
	l, err := net.Listen("unix", sock)
	must(err)
	defer l.Close()
	if got, err := FindSocket(dir); err != nil || got != sock {
		t.Fatalf("socket below: %q %v, want %s", got, err, sock)
	}
	if got, err := FindSocket(sock); err != nil || got != sock {
		t.Fatalf("the socket itself: %q %v", got, err)
	}
	big := t.TempDir()
	defer func(n int) { MaxSocketScan = n }(MaxSocketScan)
	MaxSocketScan = 50
	for i := 0; i <= MaxSocketScan; i++ {
		must(os.WriteFile(filepath.Join(big, fmt.Sprintf("f%d", i)), nil, 0o644))
	}
	if _, err := FindSocket(big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("over budget: %v, want an error", err)
	}
}
