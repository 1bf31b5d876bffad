package netpolicy

// Root-test harness: fresh network namespaces joined by a veth, test cgroups
// under the cgroup2 mount, echo servers, and a probe client (a re-exec of
// the test binary) started directly inside a cgroup and a namespace before
// it opens any socket. Everything is removed at cleanup, pass or fail.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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

func newNetns(t testing.TB) *netns {
	t.Helper()
	n := &netns{name: "gensee-t-" + randHex(4)}
	n.path = "/run/netns/" + n.name
	run(t, "ip", "netns", "add", n.name)
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

func newTopology(t *testing.T) *topology {
	t.Helper()
	tp := &topology{client: newNetns(t), server: newNetns(t)}
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
	echoTCP(t, tp.server, ":8080")
	echoTCP(t, tp.server, ":8081")
	echoUDP(t, tp.server, ":8080")
	echoTCP(t, tp.client, "127.0.0.1:9090")

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
	return tp
}

// mkCgroup makes a cgroup and, at cleanup, drains and removes it.
func mkCgroup(t *testing.T, h cgroup.Hierarchy, p string) {
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

// probeEnv carries a probe's orders to the re-executed test binary.
const (
	probeEnvKind   = "GENSEE_NETPOLICY_PROBE"
	probeEnvTarget = "GENSEE_NETPOLICY_PROBE_TARGET"
	probeEnvNetns  = "GENSEE_NETPOLICY_PROBE_NETNS"
)

// probe runs one client (kind tcp|udp|icmp) against target from inside
// cgroup p (placed there at clone, CLONE_INTO_CGROUP, before any socket
// exists) and namespace n. nil means the target answered.
func probe(t *testing.T, h cgroup.Hierarchy, p string, n *netns, kind, target string) error {
	t.Helper()
	cmd, err := probeCmd(t, h, p, n, kind, target)
	if err != nil {
		return err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s from %s: %v: %s", kind, target, p, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func probeCmd(t *testing.T, h cgroup.Hierarchy, p string, n *netns, kind, target string) (*exec.Cmd, error) {
	t.Helper()
	dir, err := h.Dir(p)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { f.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), probeEnvKind+"="+kind, probeEnvTarget+"="+target, probeEnvNetns+"="+n.path)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	return cmd, nil
}

// probeCase is one expectation: reach (true) or be denied.
type probeCase struct {
	cgroup, kind, target string
	reach                bool
}

// expect runs cases in parallel and checks each outcome.
func (tp *topology) expect(t *testing.T, cases ...probeCase) {
	t.Helper()
	errs := make([]error, len(cases))
	done := make(chan int)
	for i, c := range cases {
		go func() {
			errs[i] = probe(t, tp.h, c.cgroup, tp.client, c.kind, c.target)
			done <- i
		}()
	}
	for range cases {
		<-done
	}
	for i, c := range cases {
		switch {
		case c.reach && errs[i] != nil:
			t.Errorf("want %s %s from %s to reach: %v", c.kind, c.target, c.cgroup, errs[i])
		case !c.reach && errs[i] == nil:
			t.Errorf("want %s %s from %s denied, but it answered", c.kind, c.target, c.cgroup)
		}
	}
}

// TestMain doubles as the probe client when re-executed with probeEnvKind.
func TestMain(m *testing.M) {
	if kind := os.Getenv(probeEnvKind); kind != "" {
		if err := runProbe(kind, os.Getenv(probeEnvTarget), os.Getenv(probeEnvNetns)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runProbe(kind, target, nsPath string) error {
	runtime.LockOSThread() // sockets below are created on this thread, in nsPath
	fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", nsPath, err)
	}
	const wait = 1500 * time.Millisecond
	deadline := time.Now().Add(wait)
	msg := []byte("gensee-" + kind)
	switch kind {
	case "tcp":
		c, err := net.DialTimeout("tcp", target, wait)
		if err != nil {
			return err
		}
		defer c.Close()
		return echo(c, msg, deadline)
	case "udp":
		c, err := net.Dial("udp", target)
		if err != nil {
			return err
		}
		defer c.Close()
		return echo(c, msg, deadline)
	case "icmp":
		return ping(target, deadline)
	case "serve-tcp":
		l, err := net.Listen("tcp", target)
		if err != nil {
			return err
		}
		fmt.Println("ready")
		l.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
		c, err := l.Accept()
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(c, c)
		return err
	}
	return fmt.Errorf("unknown probe %q", kind)
}

func echo(c net.Conn, msg []byte, deadline time.Time) error {
	c.SetDeadline(deadline)
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if string(buf) != string(msg) {
		return fmt.Errorf("echo %q, want %q", buf, msg)
	}
	return nil
}

// ping sends one ICMP(v6) echo request from a raw socket (a full socket in
// the probe's cgroup) and waits for the reply.
func ping(target string, deadline time.Time) error {
	ip := net.ParseIP(target)
	network, laddr, typ, replyTyp := "ip4:icmp", "0.0.0.0", byte(8), byte(0)
	if ip.To4() == nil {
		network, laddr, typ, replyTyp = "ip6:ipv6-icmp", "::", 128, 129
	}
	c, err := net.ListenPacket(network, laddr)
	if err != nil {
		return err
	}
	defer c.Close()
	id := uint16(os.Getpid())
	pkt := []byte{typ, 0, 0, 0, byte(id >> 8), byte(id), 0, 1, 'g', 's'}
	if typ == 8 { // the kernel computes ICMPv6 checksums itself
		var sum uint32
		for i := 0; i < len(pkt); i += 2 {
			sum += uint32(pkt[i])<<8 | uint32(pkt[i+1])
		}
		sum = (sum >> 16) + (sum & 0xffff)
		sum += sum >> 16
		pkt[2], pkt[3] = byte(^sum>>8), byte(^sum)
	}
	c.SetDeadline(deadline)
	if _, err := c.WriteTo(pkt, &net.IPAddr{IP: ip}); err != nil {
		return fmt.Errorf("send echo: %w", err)
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("await echo reply: %w", err)
		}
		if n >= 8 && buf[0] == replyTyp && buf[4] == byte(id>>8) && buf[5] == byte(id) && from.(*net.IPAddr).IP.Equal(ip) {
			return nil
		}
	}
}

// startServer runs a probe server ("serve-tcp") inside cgroup p and waits
// until it listens.
func startServer(t *testing.T, h cgroup.Hierarchy, p string, n *netns, addr string) *exec.Cmd {
	t.Helper()
	cmd, err := probeCmd(t, h, p, n, "serve-tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("probe server: %q, %v", line, err)
	}
	return cmd
}
