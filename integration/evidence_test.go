package integration

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// TestManyExecsNoFalseEscape: a deny_all container on the host's network
// (the cgroup scope, where an escape downgrades the status) receives 120
// execs, four at a time: runc's exec init, in transit through the shim's
// cgroup on this hybrid host, is no escape. The manifest says enforced,
// lists no escape, and the event log holds no policy_unbound.
func TestManyExecsNoFalseEscape(t *testing.T) {
	e := startEnv(t, catalogOf([]spec.Contract{denyAll("offline")}, selector("it-execs", nil, "offline")))
	ns := e.ns("it-execs")
	e.ctr(ns, "run", "-d", "--net-host", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "busy", "/bin/sleep", "300")
	t.Cleanup(func() {
		e.ctrErr(ns, "tasks", "kill", "-s", "SIGKILL", "busy")
		waitStopped(e, ns, "busy")
		e.ctrErr(ns, "tasks", "delete", "busy")
		e.ctrErr(ns, "containers", "delete", "busy")
	})
	const execs, parallel = 120, 4
	var wg sync.WaitGroup
	errs := make(chan error, execs)
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < execs; i += parallel {
				if out, err := e.ctrErr(ns, "tasks", "exec", "--exec-id", fmt.Sprintf("x%d", i), "busy", "/bin/true"); err != nil {
					errs <- fmt.Errorf("exec %d: %v\n%s", i, err, out)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e.ctr(ns, "tasks", "kill", "-s", "SIGKILL", "busy")
	waitStopped(e, ns, "busy")
	m := e.manifest("it-execs", "busy")
	if m.Enforcement.Network.Status != spec.NetworkEnforced || len(m.Observation.Escapes) != 0 {
		t.Errorf("after %d execs: status %s, escapes %+v; want enforced and none", execs, m.Enforcement.Network.Status, m.Observation.Escapes)
	}
	// Routine rewrites (CAP_NET_RAW removed from each exec) are facts of
	// the manifest: the execs add no event at all.
	for _, ev := range e.events("it-execs", "busy") {
		t.Errorf("event %+v", ev)
	}
	if m.Enforcement.CapabilitiesRemovedExecs != execs {
		t.Errorf("capabilities_removed_execs %d, want %d", m.Enforcement.CapabilitiesRemovedExecs, execs)
	}
}

// TestEscapeeReachesDeniedTarget: in a shared netns (cgroup scope) a
// deny_all container is denied 192.0.2.2:8081; the host then moves its
// process out of the bound cgroup, where the cgroup's rules no longer
// match it, and it connects to that very target. The escaped process's
// own socket is attributed to it: deny_then_reach fires, naming it, and
// the manifest names the finding and is not enforced.
func TestEscapeeReachesDeniedTarget(t *testing.T) {
	e := startEnv(t, eventsCatalog())
	n := newTestNet(t)
	accepted := holdTCP(t, n, serverIP+":8081")
	outside := outsideCgroup(t, "escapee")
	e.runDetached("it-ev", "escapee", n.ClientPath, "/bin/sh", "-c",
		"/bin/probe connect tcp "+serverIP+":8081; while [ ! -e /go ]; do sleep 0.1; done; exec /bin/probe hold tcp "+serverIP+":8081 60")
	waitFor(t, 10*time.Second, "the denial of :8081", func() bool {
		return countKind(e.events("it-ev", "escapee"), spec.EventEgressDenied, "") > 0
	})
	if accepted.Load() != 0 {
		t.Fatal("the denied connect reached the server")
	}
	pid := int(e.admissionRecord("it-ev", "escapee")["subject"].(map[string]any)["init_pid"].(float64))
	must(t, os.WriteFile(filepath.Join(outside, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0))
	must(t, os.WriteFile(fmt.Sprintf("/proc/%d/root/go", pid), nil, 0o644))
	waitFor(t, 10*time.Second, "the escaped process reaching :8081", func() bool { return accepted.Load() > 0 })
	var defeat spec.Event
	waitFor(t, 10*time.Second, "deny_then_reach for the escaped process", func() bool {
		for _, ev := range e.events("it-ev", "escapee") {
			if ev.Kind == spec.EventControlDefeat && ev.Rule == "deny_then_reach" {
				defeat = ev
				return true
			}
		}
		return false
	})
	if !strings.Contains(defeat.Detail, fmt.Sprintf("process %d, found outside the bound cgroup", pid)) {
		t.Errorf("deny_then_reach does not name the escaped process: %+v", defeat)
	}
	e.ctr(e.ns("it-ev"), "tasks", "kill", "-s", "SIGKILL", "escapee")
	waitStopped(e, "it-ev", "escapee")
	m := e.manifest("it-ev", "escapee")
	if m.Enforcement.Network.Status != spec.NetworkDefeatDetected || len(m.Findings) == 0 {
		t.Fatalf("manifest status %s findings %+v: want defeat_detected with the finding", m.Enforcement.Network.Status, m.Findings)
	}
}

// holdTCP listens on addr in the server namespace and keeps every
// connection open until its client closes it; it counts the accepted.
func holdTCP(t *testing.T, n *testNet, addr string) *atomic.Int64 {
	t.Helper()
	var ln net.Listener
	must(t, n.inServer(func() (err error) { ln, err = net.Listen("tcp", addr); return }))
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return &accepted
}
