package integration

import (
	"fmt"
	"sync"
	"testing"

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
