package netpolicy

// The probe client: a re-exec of this test binary that joins a network
// namespace and, placed into a cgroup at clone, opens one socket and tries
// to reach a target.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/pktprobe"
	"github.com/gensee/gensee/shim/cgroup"
	"golang.org/x/sys/unix"
)

// probeEnv carries a probe's orders to the re-executed test binary.
const (
	probeEnvKind   = "GENSEE_NETPOLICY_PROBE"
	probeEnvTarget = "GENSEE_NETPOLICY_PROBE_TARGET"
	probeEnvNetns  = "GENSEE_NETPOLICY_PROBE_NETNS"
	// probeEnvLocal, if set, is the local address tcp and udp probes bind
	// before they dial (e.g. ":8080", a served port).
	probeEnvLocal = "GENSEE_NETPOLICY_PROBE_LOCAL"
)

// probe runs one client (kind tcp|udp|icmp|pingsock, tcp and udp with an
// optional "@<local address>") against target from inside
// cgroup p (placed there at clone, CLONE_INTO_CGROUP, before any socket
// exists) and namespace n. nil means the target answered.
func probe(t *testing.T, h cgroup.Hierarchy, p string, n *kerneltest.Netns, kind, target string) error {
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

func probeCmd(t *testing.T, h cgroup.Hierarchy, p string, n *kerneltest.Netns, kind, target string) (*exec.Cmd, error) {
	t.Helper()
	dir, err := h.Dir(p)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	// "tcp@:8080": a tcp probe from local port 8080.
	kind, local, _ := strings.Cut(kind, "@")
	cmd.Env = append(os.Environ(), probeEnvKind+"="+kind, probeEnvTarget+"="+target, probeEnvNetns+"="+n.Path, probeEnvLocal+"="+local)
	if err := kerneltest.IntoCgroup(t, cmd, dir); err != nil {
		return nil, err
	}
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
	var local net.Addr
	if l := os.Getenv(probeEnvLocal); l != "" {
		a, err := net.ResolveTCPAddr("tcp", l)
		if err != nil {
			return err
		}
		local = a
		if kind == "udp" {
			local = &net.UDPAddr{IP: a.IP, Port: a.Port}
		}
	}
	d := net.Dialer{Timeout: wait, LocalAddr: local}
	switch kind {
	case "tcp":
		c, err := d.Dial("tcp", target)
		if err != nil {
			return err
		}
		defer c.Close()
		return echo(c, msg, deadline)
	case "udp":
		c, err := d.Dial("udp", target)
		if err != nil {
			return err
		}
		defer c.Close()
		return echo(c, msg, deadline)
	case "icmp":
		return ping(target, deadline)
	case "pingsock":
		return pingSocket(target, deadline)
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
	case "spoof":
		return pktprobe.SpoofUDP(target)
	case "srcroute":
		return pktprobe.SourceRouted(target)
	case "serve-http":
		return serveHTTP(target)
	case "serve-udp":
		return serveUDP(target)
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

// httpReply is what serve-http answers every request with.
const httpReply = "HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\ngensee"

// serveHTTP answers HTTP-like requests on addr until killed: it reads a
// request head, writes httpReply and closes (the server closes first, so
// its TIME_WAIT socket sends the last ACK).
func serveHTTP(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
			}
			io.WriteString(c, httpReply)
		}()
	}
}

// serveUDP echoes every datagram on addr until killed.
func serveUDP(addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		pc.WriteTo(buf[:n], from)
	}
}

// startServer runs a probe server ("serve-tcp") inside cgroup p and waits
// until it listens.
func startServer(t *testing.T, h cgroup.Hierarchy, p string, n *kerneltest.Netns, addr string) *exec.Cmd {
	t.Helper()
	return startServerKind(t, h, p, n, "serve-tcp", addr)
}

// startServerKind runs probe server kind (serve-tcp, serve-http,
// serve-udp) inside cgroup p and waits until it listens; it is killed at
// cleanup.
func startServerKind(t *testing.T, h cgroup.Hierarchy, p string, n *kerneltest.Netns, kind, addr string) *exec.Cmd {
	t.Helper()
	cmd, err := probeCmd(t, h, p, n, kind, addr)
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

// pingSocket sends one echo request from an unprivileged ICMP socket
// (SOCK_DGRAM, IPPROTO_ICMP), the kind a container without CAP_NET_RAW gets.
// newTopology opens net.ipv4.ping_group_range in the client namespace.
func pingSocket(target string, deadline time.Time) error {
	ip := net.ParseIP(target).To4()
	if ip == nil {
		return fmt.Errorf("pingsock: IPv4 only, got %q", target)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err != nil {
		return fmt.Errorf("ping socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(time.Until(deadline).Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	sa := &unix.SockaddrInet4{}
	copy(sa.Addr[:], ip)
	// The kernel fills in the identifier and checksum of ping sockets.
	if err := unix.Sendto(fd, []byte{8, 0, 0, 0, 0, 0, 0, 1, 'g', 's'}, 0, sa); err != nil {
		return fmt.Errorf("send echo: %w", err)
	}
	buf := make([]byte, 1500)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("await echo reply: %w", err)
	}
	if n < 8 || buf[0] != 0 {
		return fmt.Errorf("unexpected reply % x", buf[:n])
	}
	return nil
}
