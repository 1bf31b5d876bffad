package netpolicy

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// netnsInode identifies the test's own network namespace.
func netnsInode(t *testing.T) string {
	t.Helper()
	l, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRootProbe runs the real kernel probes for a deny_all and an
// allow_exact network section and checks they found cgroup2 and nf_tables
// working and left nothing behind in the caller's namespace.
func TestRootProbe(t *testing.T) {
	roottest.Require(t)
	ctx := context.Background()
	before, err := List(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	ns := netnsInode(t)
	for name, n := range map[string]spec.Network{
		"deny_all": {Mode: spec.NetworkDenyAll},
		"allow_exact": {Mode: spec.NetworkAllowExact, Loopback: "allow", Allow: []spec.AllowRule{
			{IP: "192.0.2.10", Proto: "tcp", Port: 443},
			{IP: "2001:db8::1", Proto: "udp", Port: 53},
			{IP: "192.0.2.12", Proto: "icmp"},
		}, Serve: []spec.ServeRule{{Proto: "tcp", Port: 8080}}},
	} {
		t.Run(name, func(t *testing.T) {
			s := Probe(ctx, n, 0)
			for what, r := range map[string]ProbeResult{"cgroup2": s.Cgroup2, "socket": s.SocketCgroupV2, "nflog": s.NFLog, "table": s.Table} {
				if r.Result != ProbeOK {
					t.Errorf("%s: %+v", what, r)
				}
			}
			if !strings.Contains(s.NFLog.Detail, strconv.Itoa(int(DefaultLogGroup))) {
				t.Errorf("log group 0 is not DefaultLogGroup: %s", s.NFLog.Detail)
			}
		})
	}
	after, err := List(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(before, ",") != strings.Join(after, ",") {
		t.Errorf("gensee tables in the caller's namespace changed: %v -> %v", before, after)
	}
	if got := netnsInode(t); got != ns {
		t.Errorf("the test goroutine's namespace changed: %s -> %s", ns, got)
	}
}

// TestRootNewNetnsIsFresh checks the probe namespace is not the caller's.
func TestRootNewNetnsIsFresh(t *testing.T) {
	roottest.Require(t)
	fd, err := newNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	if l == netnsInode(t) {
		t.Errorf("new namespace %s is the caller's", l)
	}
	if fd <= 2 {
		t.Errorf("namespace fd %d is ambiguous to netlink", fd)
	}
}
