package cli

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/netpolicy"
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

// TestRootProbeHost runs the real kernel probes for both example
// contracts and checks they found nf_tables working and left nothing
// behind in the caller's namespace.
func TestRootProbeHost(t *testing.T) {
	roottest.Require(t)
	ctx := context.Background()
	before, err := netpolicy.List(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	ns := netnsInode(t)
	for _, name := range []string{"offline-structured-result.json", "allow-exact.json"} {
		t.Run(name, func(t *testing.T) {
			c, err := spec.ParseContract(readFile(t, contrib(t, name)))
			if err != nil {
				t.Fatal(err)
			}
			f := probeHost(ctx, c.Network)
			if !f.Root {
				t.Fatal("probeHost says not root")
			}
			for _, p := range []string{probeNftSocket, probeNflog, probeTable} {
				if f.Probes[p].Result != ProbeOK {
					t.Errorf("%s: %+v", p, f.Probes[p])
				}
			}
		})
	}
	after, err := netpolicy.List(ctx, -1)
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

// TestNewNetnsIsFresh checks the probe namespace is not the caller's.
func TestRootNewNetnsIsFresh(t *testing.T) {
	roottest.Require(t)
	fd, err := newNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	l, err := os.Readlink("/proc/self/fd/" + itoa(fd))
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
