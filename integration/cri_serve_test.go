package integration

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freePort is a TCP port on loopback nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ask connects to 127.0.0.1:port and returns what the server says first.
func ask(port int) (string, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(io.LimitReader(c, 64))
	return string(b), err
}

// serve: a hostNetwork pod whose contract serves one port answers a
// client on the host and one in another pod (whose contract allows that
// port); it cannot open a connection out; a port it listens on but the
// contract does not list gets no answer; the manifest counts what it served.
func (e *criEnv) serve(servePort, closedPort int, l *listener) {
	t := e.t
	podCfg := e.podConfig("web", k8sWeb, nil)
	podID := e.runp(podCfg)
	defer func() {
		e.crictlErr("stopp", podID)
		e.crictlErr("rmp", podID)
	}()
	id := e.createStart(podID, podCfg, e.containerConfig("server",
		[]string{"/bin/probe", "serve", strconv.Itoa(servePort), strconv.Itoa(closedPort)}, nil))
	e.waitState(id, "CONTAINER_RUNNING")

	var got string
	waitFor(t, 10*time.Second, "the served port answering a client on the host", func() bool {
		got, _ = ask(servePort)
		return strings.Contains(got, "pong")
	})
	if s, err := ask(closedPort); strings.Contains(s, "pong") {
		t.Errorf("port %d, not in network.serve, answered %q (%v)", closedPort, s, err)
	}
	before := l.accepted.Load()
	if out, code := e.crictlCode(append([]string{"exec", "-s", id}, "/bin/probe", "connect", "tcp", l.ln.Addr().String())...); code == 0 || l.accepted.Load() != before {
		t.Errorf("the serving pod opened a connection out (exit %d)\n%s", code, out)
	}

	// Another pod, allowed to reach the served port.
	cliCfg := e.podConfig("client", k8sClient, nil)
	cliPod := e.runp(cliCfg)
	defer func() {
		e.crictlErr("stopp", cliPod)
		e.crictlErr("rmp", cliPod)
	}()
	cid := e.createStart(cliPod, cliCfg, e.containerConfig("client", []string{"/bin/sh", "-c",
		fmt.Sprintf("/bin/nc 127.0.0.1 %d </dev/null; echo rc=$?; /bin/probe sleep 3600", servePort)}, nil))
	e.waitState(cid, "CONTAINER_RUNNING")
	waitFor(t, 10*time.Second, "the client pod's answer from the served port", func() bool {
		return strings.Contains(e.crictl("logs", cid), "pong")
	})

	e.crictl("stop", "-t", "1", id)
	m := e.manifestOf(id)
	if m == nil {
		return
	}
	if m.Observation.Served == nil || m.Observation.Served.Connections < 2 || m.Observation.Served.Packets == 0 {
		t.Fatalf("manifest served %+v, want the connections the pod answered", m.Observation.Served)
	}
	if len(m.Enforcement.Network.Serve) != 1 || m.Enforcement.Network.Serve[0].Port != servePort {
		t.Fatalf("manifest enforcement serve %+v", m.Enforcement.Network.Serve)
	}
	e.crictl("rm", id)
	e.crictl("stop", "-t", "1", cid)
	e.crictl("rm", cid)
}
