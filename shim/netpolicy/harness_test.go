package netpolicy

// Root-test harness: fresh network namespaces joined by a veth, test cgroups
// under the cgroup2 mount, echo servers, and a probe client (a re-exec of
// the test binary) started directly inside a cgroup and a namespace before
// it opens any socket. Everything is removed at cleanup, pass or fail.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
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

// netns is a named network namespace the test created.
type netns struct {
	name string
	path string
	fd   int
}

func newNetns(t testing.TB) *netns { return newNetnsIn(t, "") }

// newNetnsIn creates the namespace from a process in cgroup directory cgDir
// (if set), the way runc creates a container's: the namespace's kernel
// control sockets (TCP resets, ICMP errors) then belong to that cgroup.
func newNetnsIn(t testing.TB, cgDir string) *netns {
	t.Helper()
	n := &netns{name: "gensee-t-" + randHex(4)}
	n.path = "/run/netns/" + n.name
	cmd := exec.Command("ip", "netns", "add", n.name)
	if cgDir != "" {
		f, err := os.Open(cgDir)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", n.name, err, out)
	}
	t.Cleanup(func() {
		if n.fd > 0 {
			unix.Close(n.fd)
		}
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("cleanup: ip netns del %s: %v %s", n.name, err, out)
		}
	})
	fd, err := unix.Open(n.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", n.path, err)
	}
	n.fd = fd
	run(t, "ip", "-n", n.name, "link", "set", "lo", "up")
	return n
}

// nft runs the nft CLI inside the namespace (nsenter keeps our mount
// namespace, so nft can resolve cgroup paths; `ip netns exec` remounts /sys).
func (n *netns) nft(t testing.TB, args ...string) string {
	t.Helper()
	return run(t, "nsenter", append([]string{"--net=" + n.path, "nft"}, args...)...)
}

// do runs fn on an OS thread switched into the namespace; sockets fn opens
// stay in it for their lifetime.
func (n *netns) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime kills it on exit.
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// topology: client namespace (192.0.2.1, 2001:db8::1) and server namespace
// (192.0.2.2, 192.0.2.3, 2001:db8::2) joined by a veth; echo servers on the
// server at tcp 8080, 8081 and udp 8080, and on the client's loopback at
// tcp 127.0.0.1:9090. TEST-NET addresses, only inside these namespaces.
type topology struct {
	client, server *netns
	h              cgroup.Hierarchy
	ctr            string // container cgroup path, level 1
	ctrChild       string // a descendant of ctr
	other          string // a sibling cgroup in the same namespace
}

func newTopology(t *testing.T) *topology { return newTopologyOpt(t, false) }

// newTopologyOpt: with kernelInCtr the client namespace is created from
// inside the container cgroup (as runc does).
func newTopologyOpt(t *testing.T, kernelInCtr bool) *topology {
	t.Helper()
	tp := &topology{}
	h, err := cgroup.Find()
	if err != nil {
		t.Fatal(err)
	}
	tp.h = h
	base := "/gensee-test-" + randHex(4)
	tp.ctr, tp.ctrChild, tp.other = base, base+"/child", base+"-other"
	mkCgroup(t, h, tp.ctr)
	mkCgroup(t, h, tp.ctrChild)
	mkCgroup(t, h, tp.other)
	creator := ""
	if kernelInCtr {
		creator, _ = h.Dir(tp.ctr)
	}
	tp.client, tp.server = newNetnsIn(t, creator), newNetns(t)
	veth := "gt" + randHex(4)
	run(t, "ip", "link", "add", veth+"c", "netns", tp.client.name, "type", "veth", "peer", "name", veth+"s", "netns", tp.server.name)
	for _, c := range [][]string{
		{"-n", tp.client.name, "addr", "add", "192.0.2.1/24", "dev", veth + "c"},
		{"-n", tp.client.name, "addr", "add", "2001:db8::1/64", "dev", veth + "c", "nodad"},
		{"-n", tp.client.name, "link", "set", veth + "c", "up"},
		{"-n", tp.server.name, "addr", "add", "192.0.2.2/24", "dev", veth + "s"},
		{"-n", tp.server.name, "addr", "add", "192.0.2.3/24", "dev", veth + "s"},
		{"-n", tp.server.name, "addr", "add", "2001:db8::2/64", "dev", veth + "s", "nodad"},
		{"-n", tp.server.name, "link", "set", veth + "s", "up"},
	} {
		run(t, "ip", c...)
	}
	// Unprivileged ICMP (ping) sockets for every group, as Docker sets it.
	if err := tp.client.do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 2147483647"), 0)
	}); err != nil {
		t.Fatalf("open ping_group_range: %v", err)
	}
	echoTCP(t, tp.server, ":8080")
	echoTCP(t, tp.server, ":8081")
	echoUDP(t, tp.server, ":8080")
	echoTCP(t, tp.client, "127.0.0.1:9090")
	return tp
}

// mkCgroup makes a cgroup and, at cleanup, drains and removes it.
func mkCgroup(t testing.TB, h cgroup.Hierarchy, p string) {
	t.Helper()
	dir, err := h.Dir(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make cgroup: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := h.Drain(ctx, p); err != nil {
			t.Errorf("cleanup: drain %s: %v", p, err)
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("cleanup: rmdir %s: %v", dir, err)
		}
	})
}

func (tp *topology) cgroupRef(t *testing.T) CgroupRef {
	t.Helper()
	id, err := tp.h.ID(tp.ctr)
	if err != nil {
		t.Fatal(err)
	}
	return CgroupRef{Path: tp.ctr, ID: id, Level: cgroup.Level(tp.ctr)}
}

func echoTCP(t *testing.T, n *netns, addr string) {
	t.Helper()
	var l net.Listener
	if err := n.do(func() (err error) { l, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatalf("listen tcp %s in %s: %v", addr, n.name, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
}

func echoUDP(t *testing.T, n *netns, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := n.do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		t.Fatalf("listen udp %s in %s: %v", addr, n.name, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
}
