package netpolicy

// Root-test harness: fresh network namespaces (kerneltest) joined by a veth,
// test cgroups under the cgroup2 mount, echo servers, and a probe client (a
// re-exec of the test binary, probe_test.go) started directly inside a
// cgroup and a namespace before it opens any socket. Everything is removed
// at cleanup, pass or fail.

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/shim/cgroup"
)

// topology: client namespace (192.0.2.1, 2001:db8::1) and server namespace
// (192.0.2.2, 192.0.2.3, 2001:db8::2) joined by a veth; echo servers on the
// server at tcp 8080, 8081 and udp 8080, and on the client's loopback at
// tcp 127.0.0.1:9090. TEST-NET addresses, only inside these namespaces.
type topology struct {
	client, server *kerneltest.Netns
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
	ctr := kerneltest.NewCgroup(t)
	tp := &topology{h: ctr.H, ctr: ctr.Path, ctrChild: ctr.Path + "/child", other: ctr.Path + "-other"}
	kerneltest.MakeCgroup(t, tp.h, tp.ctrChild)
	kerneltest.MakeCgroup(t, tp.h, tp.other)
	creator := ""
	if kernelInCtr {
		creator = ctr.Dir
	}
	tp.client, tp.server = kerneltest.NewNetnsIn(t, creator), kerneltest.NewNetns(t)
	veth := "gt" + kerneltest.RandHex(4)
	kerneltest.Run(t, "ip", "link", "add", veth+"c", "netns", tp.client.Name, "type", "veth", "peer", "name", veth+"s", "netns", tp.server.Name)
	for _, c := range [][]string{
		{"-n", tp.client.Name, "addr", "add", "192.0.2.1/24", "dev", veth + "c"},
		{"-n", tp.client.Name, "addr", "add", "2001:db8::1/64", "dev", veth + "c", "nodad"},
		{"-n", tp.client.Name, "link", "set", veth + "c", "up"},
		{"-n", tp.server.Name, "addr", "add", "192.0.2.2/24", "dev", veth + "s"},
		{"-n", tp.server.Name, "addr", "add", "192.0.2.3/24", "dev", veth + "s"},
		{"-n", tp.server.Name, "addr", "add", "2001:db8::2/64", "dev", veth + "s", "nodad"},
		{"-n", tp.server.Name, "link", "set", veth + "s", "up"},
	} {
		kerneltest.Run(t, "ip", c...)
	}
	// Until the kernel's link watch has run for a new link (up to a
	// second on a busy machine), it keeps the noop qdisc and drops what
	// is sent: a UDP probe, which is not retried, would time out. Its
	// operational state says it has run.
	waitOperUp(t, tp.client.Name, veth+"c")
	waitOperUp(t, tp.server.Name, veth+"s")
	// Unprivileged ICMP (ping) sockets for every group, as Docker sets it.
	if err := tp.client.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 2147483647"), 0)
	}); err != nil {
		t.Fatalf("open ping_group_range: %v", err)
	}
	tp.server.EchoTCP(t, ":8080")
	tp.server.EchoTCP(t, ":8081")
	echoUDP(t, tp.server, ":8080")
	tp.client.EchoTCP(t, "127.0.0.1:9090")
	return tp
}

// waitOperUp waits for link dev in network namespace ns to be
// operationally up (ip link's "state UP").
func waitOperUp(t *testing.T, ns, dev string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if strings.Contains(kerneltest.Run(t, "ip", "-n", ns, "link", "show", "dev", dev), " state UP ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("link %s in %s is not up after 5s", dev, ns)
		}
	}
}

func (tp *topology) cgroupRef(t *testing.T) CgroupRef {
	t.Helper()
	id, err := tp.h.ID(tp.ctr)
	if err != nil {
		t.Fatal(err)
	}
	return CgroupRef{Path: tp.ctr, ID: id, Level: cgroup.Level(tp.ctr)}
}

func echoUDP(t *testing.T, n *kerneltest.Netns, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := n.Do(func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		t.Fatalf("listen udp %s in %s: %v", addr, n.Name, err)
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
