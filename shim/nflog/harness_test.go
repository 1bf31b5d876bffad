package nflog

// Root-test harness: a fresh network namespace (loopback only), a test
// cgroup, a gensee table bound to it, and clients started inside both
// (CLONE_INTO_CGROUP, then nsenter) before they open a socket. Everything
// is removed at cleanup, pass or fail.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// env is one sandbox: namespace, cgroup, table.
type env struct {
	nsName, nsPath string
	nsFD           int
	h              cgroup.Hierarchy
	cg             string // cgroup path
	plan           *netpolicy.Plan
}

func newEnv(t *testing.T, n spec.Network) *env {
	t.Helper()
	e := &env{nsName: "gensee-t-" + randHex(4)}
	e.nsPath = "/run/netns/" + e.nsName
	run(t, "ip", "netns", "add", e.nsName)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", e.nsName).CombinedOutput(); err != nil {
			t.Errorf("cleanup: ip netns del %s: %v %s", e.nsName, err, out)
		}
	})
	run(t, "ip", "-n", e.nsName, "link", "set", "lo", "up")
	fd, err := unix.Open(e.nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	e.nsFD = fd

	if e.h, err = cgroup.Find(); err != nil {
		t.Fatal(err)
	}
	e.cg = "/gensee-test-" + randHex(4)
	dir, err := e.h.Dir(e.cg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := e.h.Drain(ctx, e.cg); err != nil {
			t.Errorf("cleanup: drain %s: %v", e.cg, err)
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("cleanup: rmdir %s: %v", dir, err)
		}
	})
	id, err := e.h.ID(e.cg)
	if err != nil {
		t.Fatal(err)
	}
	e.plan, err = netpolicy.NewPlan("t"+randHex(8), n, netpolicy.CgroupRef{Path: e.cg, ID: id, Level: cgroup.Level(e.cg)})
	if err != nil {
		t.Fatal(err)
	}
	if err := netpolicy.Apply(context.Background(), fd, e.plan); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netpolicy.Remove(context.Background(), fd, e.plan.Table); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return e
}

// sh runs a bash script inside the cgroup and the namespace and returns its
// combined output; failures of the script are the test's to judge.
func (e *env) sh(t *testing.T, script string) string {
	t.Helper()
	dir, err := e.h.Dir(e.cg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+e.nsPath, "bash", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	out, _ := cmd.CombinedOutput()
	return string(out)
}
