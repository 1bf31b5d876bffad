package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testNet is a container netns joined by a veth to a server netns. Both are
// made by the test; addresses are TEST-NET / documentation ranges that
// exist only inside these namespaces, so no traffic leaves the machine.
type testNet struct {
	t          *testing.T
	client     string // netns name for the container
	server     string
	ClientPath string
}

// Server side addresses.
const (
	serverIP  = "192.0.2.2"
	serverIP2 = "192.0.2.3"
	serverIP6 = "2001:db8::2"
	clientIP  = "192.0.2.1"
	clientIP6 = "2001:db8::1"
)

func newTestNet(t *testing.T) *testNet {
	t.Helper()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	n := &testNet{t: t, client: "gensee-itc-" + suffix, server: "gensee-its-" + suffix}
	n.ClientPath = "/var/run/netns/" + n.client
	t.Cleanup(n.close)
	veth := "gsv" + suffix[len(suffix)-6:]
	for _, args := range [][]string{
		{"netns", "add", n.client}, {"netns", "add", n.server},
		{"link", "add", veth + "c", "netns", n.client, "type", "veth", "peer", "name", veth + "s", "netns", n.server},
		{"-n", n.client, "link", "set", "lo", "up"}, {"-n", n.server, "link", "set", "lo", "up"},
		{"-n", n.client, "addr", "add", clientIP + "/24", "dev", veth + "c"},
		{"-n", n.client, "addr", "add", clientIP6 + "/64", "dev", veth + "c", "nodad"},
		{"-n", n.server, "addr", "add", serverIP + "/24", "dev", veth + "s"},
		{"-n", n.server, "addr", "add", serverIP2 + "/24", "dev", veth + "s"},
		{"-n", n.server, "addr", "add", serverIP6 + "/64", "dev", veth + "s", "nodad"},
		{"-n", n.client, "link", "set", veth + "c", "up"}, {"-n", n.server, "link", "set", veth + "s", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	// Unprivileged ICMP echo sockets for every gid in the container netns,
	// so an ICMP denial is the table's doing, not the sysctl's.
	if out, err := exec.Command("ip", "netns", "exec", n.client, "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647").CombinedOutput(); err != nil {
		t.Fatalf("sysctl: %v\n%s", err, out)
	}
	return n
}

func (n *testNet) close() {
	for _, ns := range []string{n.client, n.server} {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			n.t.Logf("ip netns del %s: %v %s", ns, err, out)
		}
	}
}

// inServer runs fn on a thread switched into the server netns; sockets fn
// opens stay in that netns.
func (n *testNet) inServer(fn func() error) error { return inNetns("/var/run/netns/"+n.server, fn) }

// inClient runs fn on a thread in the container's (shared) network
// namespace: a process of the host there, not of the container.
func (n *testNet) inClient(fn func() error) error { return inNetns(n.ClientPath, fn) }

// inNetns runs fn on a thread switched into the network namespace at path.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// listener counts accepted TCP connections.
type listener struct {
	ln       net.Listener
	accepted atomic.Int64
}

func serveTCP(t *testing.T, ln net.Listener) *listener {
	l := &listener{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			c.Close()
		}
	}()
	return l
}

// listenTCP listens on addr inside the server netns.
func (n *testNet) listenTCP(addr string) *listener {
	var ln net.Listener
	if err := n.inServer(func() (err error) { ln, err = net.Listen("tcp", addr); return }); err != nil {
		n.t.Fatalf("listen %s: %v", addr, err)
	}
	return serveTCP(n.t, ln)
}

// echoUDP answers every datagram on addr inside the server netns.
func (n *testNet) echoUDP(addr string) *atomic.Int64 {
	var pc net.PacketConn
	if err := n.inServer(func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		n.t.Fatalf("listen udp %s: %v", addr, err)
	}
	n.t.Cleanup(func() { pc.Close() })
	var got atomic.Int64
	go func() {
		buf := make([]byte, 512)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			got.Add(1)
			pc.WriteTo(buf[:k], from)
		}
	}()
	return &got
}

// hostListener counts connections to a loopback port of the host netns.
func hostListener(t *testing.T) (*listener, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveTCP(t, ln), ln.Addr().String()
}
