package integration

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// TestHostFlowIsNotTheContainers (F1): in a shared network namespace a
// deny_all container is denied serverIP:8081, which puts the target on the
// deny-then-reach watch; then a process of the host, not of the container,
// connects to that target from the same namespace and gets its answers
// (one connection closed into TIME_WAIT, one held open). Conntrack holds
// both replied flows, but the table did not label them as the container's
// (label 27): no deny_then_reach, and the manifest says enforced.
func TestHostFlowIsNotTheContainers(t *testing.T) {
	e := startEnv(t, eventsCatalog())
	n := newTestNet(t)
	l := n.listenTCP(serverIP + ":8081")
	e.runDetached("it-ev", "shared", n.ClientPath, "/bin/sh", "-c",
		"while true; do /bin/probe connect tcp "+serverIP+":8081; sleep 0.3; done")
	waitFor(t, 10*time.Second, "an egress_denied event for :8081", func() bool {
		for _, ev := range e.events("it-ev", "shared") {
			if ev.Kind == spec.EventEgressDenied && ev.Target == serverIP+":8081/tcp" {
				return true
			}
		}
		return false
	})

	var held net.Conn
	dial := func() (net.Conn, error) {
		c, err := net.DialTimeout("tcp", serverIP+":8081", 2*time.Second)
		if err != nil {
			return nil, err
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("host")); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	if err := n.inClient(func() error {
		c, err := dial()
		if err != nil {
			return err
		}
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c)
		c.Close() // the active close: TIME_WAIT here
		held, err = dial()
		return err
	}); err != nil {
		t.Fatalf("the host's connection to %s:8081 from the shared namespace: %v", serverIP, err)
	}
	defer held.Close()
	waitFor(t, 5*time.Second, "the server accepting the host's 2 connections", func() bool { return l.accepted.Load() >= 2 })
	time.Sleep(4 * time.Second) // many flow polls (0.5 s) see both flows
	for _, ev := range e.events("it-ev", "shared") {
		if ev.Kind == spec.EventControlDefeat {
			t.Fatalf("a host process's flow was taken for the container's: %+v", ev)
		}
	}
	e.ctr("it-ev", "tasks", "kill", "-s", "SIGKILL", "shared")
	waitStopped(e, "it-ev", "shared")
	m := e.manifest("it-ev", "shared")
	if m.Enforcement.Network.Status != spec.NetworkEnforced || len(m.Findings) != 0 {
		t.Fatalf("manifest status %s, findings %+v: want enforced, none", m.Enforcement.Network.Status, m.Findings)
	}
}
