package integration

import (
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/pktprobe"
	"github.com/gensee/gensee/spec"
)

// The network paths a packet's own header chooses, through ctr with the
// container in the test's netns: forged sources on a served port and
// source-routed sends (docs/spec-admission.md, "Network").

func servesUDP() spec.Contract {
	c := denyAll("serve-udp")
	c.Network.Serve = []spec.ServeRule{{Proto: spec.ProtoUDP, Port: 8080}}
	return c
}

func firstHopOnly() spec.Contract {
	return spec.Contract{ID: "first-hop", Version: 1, Network: spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{
		{IP: serverIP, Proto: spec.ProtoUDP, Port: 8080}, {IP: serverIP6, Proto: spec.ProtoUDP, Port: 8080},
	}}}
}

// TestServedForgedSource: a deny_all container serving udp 8080 first tries
// a peer it is denied. Datagrams to the served port with forged sources
// that do not route back through their interface are dropped before
// conntrack confirms them, counted as reverse-path drops, and open no path;
// a genuine datagram from the denied peer is answered, and that answer is
// a deny_then_reach. The text manifest and the operation's audit show the
// served traffic.
func TestServedForgedSource(t *testing.T) {
	e := startEnv(t, catalogOf([]spec.Contract{servesUDP()}, selector("it-serve", nil, "serve-udp")))
	n := newTestNet(t)
	e.runDetached("it-serve", "served", n.ClientPath, "/bin/sh", "-c",
		"/bin/probe connect udp "+serverIP+":5353; exec /bin/probe udpecho 8080")
	waitFor(t, 10*time.Second, "egress_denied for the peer", func() bool {
		return countKind(e.events("it-serve", "served"), spec.EventEgressDenied, "") > 0
	})

	// The genuine peer, the one the container was denied, over IPv4; and
	// a genuine IPv6 peer (whose exchange also settles neighbor discovery
	// for the forged IPv6 datagram below).
	for _, c := range [][2]string{{serverIP + ":5353", clientIP + ":8080"}, {"[" + serverIP6 + "]:5353", "[" + clientIP6 + "]:8080"}} {
		if got := askUDP(t, n, c[0], c[1]); got != "hello" {
			t.Fatalf("the served port did not answer its genuine peer %s (got %q)", c[0], got)
		}
	}
	// Forged sources: no route back to them through the veth. The
	// kernel's own IPv4 reverse-path filter (rp_filter, on where the host
	// sets it for new namespaces) would drop the IPv4 one before the
	// table sees it: off, as on most pods' interfaces.
	if out, err := exec.Command("ip", "netns", "exec", n.client, "sh", "-c",
		"for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done").CombinedOutput(); err != nil {
		t.Fatalf("rp_filter: %v\n%s", err, out)
	}
	for _, step := range [][2]string{{"198.51.100.7:5353", clientIP + ":8080"}, {"[2001:db8:2::7]:5353", "[" + clientIP6 + "]:8080"}} {
		src, dst := netip.MustParseAddrPort(step[0]), netip.MustParseAddrPort(step[1])
		if err := n.inServer(func() error { return pktprobe.SpoofOne(src, dst) }); err != nil {
			t.Fatalf("forge %s > %s: %v", src, dst, err)
		}
	}

	waitFor(t, 10*time.Second, "deny_then_reach for the answered peer", func() bool {
		for _, ev := range e.events("it-serve", "served") {
			if ev.Kind == spec.EventControlDefeat && ev.Rule == "deny_then_reach" && ev.Target == serverIP+":5353/udp" {
				return true
			}
		}
		return false
	})

	e.ctr(e.ns("it-serve"), "tasks", "kill", "-s", "SIGKILL", "served")
	waitStopped(e, "it-serve", "served")
	m := e.manifest("it-serve", "served")
	sv := m.Observation.Served
	if sv == nil || sv.ReversePathDropped != 2 || sv.Packets < 2 {
		t.Fatalf("observation.served %+v: want both forged datagrams dropped (reverse path) and the answers counted", sv)
	}
	gensee := func(args ...string) string {
		out, _ := exec.Command(filepath.Join(e.bin, "gensee"), append(args, "--config", e.cfgPath, "--container", "served", "--namespace", "it-serve")...).CombinedOutput()
		return string(out)
	}
	if out := gensee("manifest", "show"); !strings.Contains(out, "forged source dropped (reverse path)") {
		t.Errorf("manifest show names no reverse-path drop:\n%s", out)
	}
	if out := gensee("boundary", "audit"); !strings.Contains(strings.ToLower(out), "served") || !strings.Contains(out, "deny_then_reach") {
		t.Errorf("boundary audit shows no served section or no deny_then_reach:\n%s", out)
	}
}

// askUDP sends "hello" from the server namespace, from src to dst, until
// an answer comes back (5 s at most), and returns the answer.
func askUDP(t *testing.T, n *testNet, src, dst string) string {
	t.Helper()
	var answer string
	err := n.inServer(func() error {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(src)), net.UDPAddrFromAddrPort(netip.MustParseAddrPort(dst)))
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 64)
		for i := 0; i < 20 && answer == ""; i++ {
			if _, err := c.Write([]byte("hello")); err != nil {
				return err
			}
			c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
			if k, err := c.Read(buf); err == nil {
				answer = string(buf[:k])
			}
		}
		return nil
	})
	must(t, err)
	return answer
}

// TestSourceRoutedSends: a container allowed one first hop names its own
// path past it. The IPv4 options (LSRR, SSRR) need CAP_NET_RAW, which the
// container does not hold: setsockopt fails. The IPv6 routing header needs
// nothing: the send is dropped (EPERM) and counted as denied.
func TestSourceRoutedSends(t *testing.T) {
	e := startEnv(t, catalogOf([]spec.Contract{firstHopOnly()}, selector("it-srcroute", nil, "first-hop")))
	n := newTestNet(t)
	script := "/bin/probe connect udp " + serverIP + ":8080; echo allowed=$?; " +
		"for r in lsrr,192.0.2.2,203.0.113.9:8080 ssrr,192.0.2.2,203.0.113.9:8080 'rt6,2001:db8::2,[2001:db8:99::9]:8080'; do " +
		"/bin/probe srcroute $r 2>&1; echo $r=$?; done"
	n.echoUDP(serverIP + ":8080")
	out, code := e.run("it-srcroute", "srcroute", []string{"--with-ns", "network:" + n.ClientPath}, "/bin/sh", "-c", script)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "allowed=0") {
		t.Fatalf("the allowed first hop itself was not reached:\n%s", out)
	}
	for _, want := range []string{
		"probe: setsockopt IP_OPTIONS: operation not permitted\nlsrr,",
		"probe: setsockopt IP_OPTIONS: operation not permitted\nssrr,",
		"probe: operation not permitted\nrt6,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the output:\n%s", want, out)
		}
	}
	m := e.manifest("it-srcroute", "srcroute")
	if c := m.Observation.Counters; c.DeniedPackets != 1 || c.AllowedPackets != 1 {
		t.Errorf("counters %+v: want the routing-header datagram denied and only the plain one allowed", c)
	}
}
