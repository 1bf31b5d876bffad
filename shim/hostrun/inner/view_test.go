package inner

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUnixSocketPaths(t *testing.T) {
	p := filepath.Join(t.TempDir(), "unix")
	body := "Num       RefCount Protocol Flags    Type St Inode Path\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 20817 /run/systemd/private\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 20818 @/tmp/.X11-unix/X0\n" +
		"0000000000000000: 00000003 00000000 00000000 0001 03 20819\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 20820 /srv/a dir/sock\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got := unixSockets(p)
	if len(got) != 2 || got[0] != (unixSocket{20817, "/run/systemd/private"}) || got[1] != (unixSocket{20820, "/srv/a dir/sock"}) {
		t.Fatalf("sockets %+v", got)
	}
	out, in := splitUnder([]string{"/run/x", "/srv/s", "/ws/s", "/tmp/s", "/wsx/s"}, "/ws")
	if len(out) != 2 || out[0] != "/srv/s" || out[1] != "/wsx/s" || len(in) != 1 || in[0] != "/ws/s" {
		t.Fatalf("split %q %q", out, in)
	}
}

func TestUnderPrivateTmp(t *testing.T) {
	for p, want := range map[string]bool{"/tmp/ws": true, "/var/tmp/a/b": true, "/tmp": false, "/tmpx/ws": false, "/srv/ws": false} {
		if got := under(p); got != want {
			t.Errorf("under(%q) = %v", p, got)
		}
	}
}

// A socket's path is as its binder wrote it: one that only names /tmp or
// /run on its way out of them is outside them, and masked.
func TestSplitUnderUncleanPaths(t *testing.T) {
	out, in := splitUnder([]string{"/tmp/../home/alice/agent.sock", "/run/../srv/db.sock", "/ws/../etc/s.sock"}, "/ws")
	if len(out) != 3 || len(in) != 0 {
		t.Fatalf("outside %v, inside %v: every one lies outside /tmp, /run and the workspace", out, in)
	}
}
