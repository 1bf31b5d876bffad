package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// run is `ctr run --rm` of the test image under the gensee runtime; it
// returns ctr's output and exit code.
func (e *env) run(ns, id string, flags []string, args ...string) (string, int) {
	e.t.Helper()
	all := append([]string{"run", "--rm", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath}, flags...)
	all = append(all, e.image, id)
	all = append(all, args...)
	out, err := e.ctrErr(e.ns(ns), all...)
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("ctr run: %v", err)
		}
		code = ee.ExitCode()
	}
	return out, code
}

func hostEnv(t *testing.T) []string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=/bin", "HOSTNAME=" + h}
}

func loopbackOK(id string) spec.Contract {
	c := denyAll(id)
	c.Network.Loopback = spec.LoopbackAllow
	return c
}

// TestDenyAllFirstInstruction: the very first instruction of the workload
// connects to a listening server and is denied; the deny counter moved.
func TestDenyAllFirstInstruction(t *testing.T) {
	e := startEnv(t, catalogOf([]spec.Contract{denyAll("offline"), loopbackOK("loopback-ok")},
		selector("it-deny", map[string]string{"build": "offline"}, "offline"),
		selector("it-lo", map[string]string{"build": "loopback-ok"}, "loopback-ok")))

	{ // host netns (--net-host): the server is on the host's loopback
		l, addr := hostListener(t)
		out, code := e.run("it-deny", "deny-host", []string{"--net-host"}, "/bin/probe", "connect", "tcp", addr)
		if code != 1 {
			t.Fatalf("probe exit %d, want 1 (denied)\n%s", code, out)
		}
		if n := l.accepted.Load(); n != 0 {
			t.Fatalf("listener accepted %d connections under deny_all", n)
		}
		m := e.manifest("it-deny", "deny-host")
		if d := m.Observation.Counters.DeniedPackets; d == 0 {
			t.Fatalf("deny counter 0, want > 0: %+v", m.Observation.Counters)
		}
		if m.Enforcement.Network.TableRemoved != "deleted" {
			t.Fatalf("host-netns table not deleted at exit: %q", m.Enforcement.Network.TableRemoved)
		}
		// Positive control: loopback allowed by contract connects.
		out, code = e.run("it-lo", "lo-host", []string{"--net-host"}, "/bin/probe", "connect", "tcp", addr)
		if code != 0 || l.accepted.Load() != 1 {
			t.Fatalf("loopback-ok run: exit %d, accepted %d\n%s", code, l.accepted.Load(), out)
		}
	}

	{ // a netns of the test's own, joined by the container (--with-ns)
		n := newTestNet(t)
		l := n.listenTCP(serverIP + ":8080")
		out, code := e.run("it-deny", "deny-netns", []string{"--with-ns", "network:" + n.ClientPath}, "/bin/probe", "connect", "tcp", serverIP+":8080")
		if code != 1 || l.accepted.Load() != 0 {
			t.Fatalf("exit %d accepted %d, want denied\n%s", code, l.accepted.Load(), out)
		}
		m := e.manifest("it-deny", "deny-netns")
		if d := m.Observation.Counters.DeniedPackets; d == 0 {
			t.Fatalf("deny counter 0, want > 0")
		}
		if m.Enforcement.Network.TableRemoved != "deleted" {
			t.Fatalf("joined-netns table not deleted at exit: %q", m.Enforcement.Network.TableRemoved)
		}
		if tables := netnsTables(t, n.client); len(tables) > 0 {
			t.Fatalf("tables left in the container netns: %v", tables)
		}
	}
}

func netnsTables(t *testing.T, ns string) []string {
	out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables in %s: %v %s", ns, err, out)
	}
	return genseeTables(out)
}

// TestAllowExact: only the allowed tuples pass; execs are bound too.
func TestAllowExact(t *testing.T) {
	allow := spec.Contract{ID: "allow-server", Version: 1, Network: spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{
		{IP: serverIP, Proto: spec.ProtoTCP, Port: 8080},
		{IP: serverIP2, Proto: spec.ProtoICMP},
	}}}
	e := startEnv(t, catalogOf([]spec.Contract{allow}, selector("it-allow", map[string]string{"fetch": "allow-server"}, "allow-server")))
	n := newTestNet(t)
	l8080 := n.listenTCP(serverIP + ":8080")
	l8081 := n.listenTCP(serverIP + ":8081")
	l2 := n.listenTCP(serverIP2 + ":8080")
	l6 := n.listenTCP("[" + serverIP6 + "]:8080")
	udp := n.echoUDP(serverIP + ":8080")

	ns := e.ns("it-allow")
	e.ctr(ns, "run", "-d", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath,
		"--with-ns", "network:"+n.ClientPath, e.image, "allow-1", "/bin/sleep", "300")
	defer func() {
		e.ctrErr(ns, "tasks", "kill", "-s", "SIGKILL", "allow-1")
		waitStopped(e, ns, "allow-1")
		e.ctr(ns, "tasks", "delete", "allow-1")
		e.ctr(ns, "containers", "delete", "allow-1")
	}()
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"allowed tuple", []string{"connect", "tcp", serverIP + ":8080"}, 0},
		{"same ip other port", []string{"connect", "tcp", serverIP + ":8081"}, 1},
		{"other ip", []string{"connect", "tcp", serverIP2 + ":8080"}, 1},
		{"ipv6", []string{"connect", "tcp", "[" + serverIP6 + "]:8080"}, 1},
		{"udp", []string{"connect", "udp", serverIP + ":8080"}, 1},
		{"icmp allowed", []string{"ping4", serverIP2}, 0},
		{"icmp denied", []string{"ping4", serverIP}, 1},
		{"ipv6 icmp", []string{"ping6", serverIP6}, 1},
	}
	for i, tc := range cases {
		out, err := e.ctrErr(ns, append([]string{"tasks", "exec", "--exec-id", "p" + string(rune('a'+i)), "allow-1", "/bin/probe"}, tc.args...)...)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.want {
			t.Errorf("%s: exit %d, want %d\n%s", tc.name, code, tc.want, out)
		}
	}
	if l8080.accepted.Load() != 1 || l8081.accepted.Load() != 0 || l2.accepted.Load() != 0 || l6.accepted.Load() != 0 || udp.Load() != 0 {
		t.Errorf("server view: 8080=%d 8081=%d ip2=%d v6=%d udp=%d; want 1 0 0 0 0",
			l8080.accepted.Load(), l8081.accepted.Load(), l2.accepted.Load(), l6.accepted.Load(), udp.Load())
	}
}

// waitStopped waits until the task of id is no longer running.
func waitStopped(e *env, ns, id string) {
	for i := 0; i < 100; i++ {
		out, _ := e.ctrErr(ns, "tasks", "ls")
		if !strings.Contains(out, id) || !strings.Contains(lineOf(out, id), "RUNNING") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lineOf(out, id string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, id+" ") {
			return l
		}
	}
	return ""
}
