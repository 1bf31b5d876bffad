package integration

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/hooks"
	"github.com/gensee/gensee/spec"
)

// The same guarantees through every door: one set of contracts run as a
// container of a private containerd (ctr), as a podman container with the
// OCI hook, and as `gensee boundary run`, each door through the helpers its
// own tests use; then the manifests are compared field by field
// (doors_compare_test.go says which fields must agree and which are each
// door's own, and why).
//
// Every network case runs in the host's network namespace, the one netns
// all three doors can share (ctr --net-host, podman --network=host; a host
// run always does), with its servers on 127.0.0.1, so the network fields
// compare as they are. The product cases run where a product job would:
// in a netns of the container's own for the two container doors, in the
// host's for the host run; the fields that depend on the netns then
// compare only between runs of the same netns kind.

// doorsNS is the containerd namespace of the containerd door's runs.
const doorsNS = "it-doors"

// door is one front door and the means to run a workload through it.
type door struct {
	name   string
	probe  string // integration/probe as the workload names it
	ws     string // the contract's workspace as the workload names it
	envOf  *env   // its trust material: publish signs its catalog; t is rebound per case
	runner func(t *testing.T, id string, shared bool, script string) doorRun
}

// doorRun is what one run through a door left.
type doorRun struct {
	m     *spec.Manifest // nil when the door wrote none (an error says why)
	code  int            // the door's own exit status: ctr's, podman's, gensee's
	out   string
	netns spec.NetnsKind // where the workload's sockets lived
}

// doorCase is one contract and a workload that exercises it, with the
// behaviour every door must show (check) before manifests are compared.
type doorCase struct {
	name     string
	contract spec.Contract
	// shared: the workload's sockets live in the host's netns in every
	// door; else in a netns of its own where the door makes one.
	shared bool
	script string // {probe} and {ws} are the door's
	// serve: a client on the host asks the workload's served port while
	// it runs; check is handed the answer.
	serve int
	check func(t *testing.T, d string, r doorRun, answer string)
	// cannot names the doors that cannot run this case at all, with the
	// reason; such a door is reported, never silently skipped. Today
	// every door runs every case.
	cannot map[string]string
}

// TestDoors runs each contract through each front door and compares the
// manifests: what the contract means must read the same whichever door
// ran it.
func TestDoors(t *testing.T) {
	roottest.Require(t)
	deniedPort, deniedSeen := runListener(t)
	allowPort, allowSeen := runListener(t)
	otherPort, otherSeen := runListener(t)
	servePort := freePort(t)
	cases := doorCases(deniedPort, allowPort, otherPort, servePort, deniedSeen, allowSeen, otherSeen)
	contracts := make([]spec.Contract, 0, len(cases))
	for _, c := range cases {
		if !containsContract(contracts, c.contract.ID) {
			contracts = append(contracts, c.contract)
		}
	}
	doors := startDoors(t, doorsCatalog(contracts, cases[0].contract.ID))

	diffs := map[string][]string{}
	results := map[string]map[string]string{}
	for _, c := range cases {
		results[c.name] = map[string]string{}
		t.Run(c.name, func(t *testing.T) {
			cat := doorsCatalog(contracts, c.contract.ID)
			runs := map[string]doorRun{}
			for _, d := range doors {
				r, ran := d.publishAndRun(t, c, cat)
				if !ran {
					results[c.name][d.name] = "cannot run: " + c.cannot[d.name]
					continue
				}
				runs[d.name] = r
				results[c.name][d.name] = r.summary()
			}
			diffs[c.name] = compareDoors(t, c, runs)
		})
	}
	t.Log("door × case:")
	for _, c := range cases {
		for _, d := range doors {
			t.Logf("  %-16s %-9s %s", c.name, d.name, results[c.name][d.name])
		}
		if len(diffs[c.name]) == 0 {
			t.Logf("  %-16s every compared field agrees", c.name)
		}
		for _, df := range diffs[c.name] {
			t.Logf("  %-16s DIFFERS %s", c.name, df)
		}
	}
}

// publishAndRun publishes cat in d's env (every door's catalog moves in
// step, so catalog_version compares) and runs c through d, with the env
// (and so its helpers' Fatal and Cleanup) pointed at t meanwhile. ran is
// false for a door c says cannot run it.
func (d door) publishAndRun(t *testing.T, c doorCase, cat spec.Catalog) (r doorRun, ran bool) {
	parent := d.envOf.t
	d.envOf.t = t
	defer func() { d.envOf.t = parent }()
	d.envOf.publish(cat)
	if why, ok := c.cannot[d.name]; ok {
		t.Logf("%s cannot run %s: %s", d.name, c.name, why)
		return doorRun{}, false
	}
	return d.runCase(t, c), true
}

// runCase runs c's workload through d and checks the behaviour c asks for.
func (d door) runCase(t *testing.T, c doorCase) doorRun {
	script := strings.NewReplacer("{probe}", d.probe, "{ws}", d.ws).Replace(c.script)
	stop := func() string { return "" }
	if c.serve != 0 {
		stop = askWhileRunning(c.serve)
		defer stop() // the asker ends even when the runner fails the test
	}
	r := d.runner(t, "doors-"+strings.ReplaceAll(c.name, "_", "-"), c.shared, script)
	answer := stop()
	if r.m == nil {
		t.Errorf("%s: no manifest (exit %d)\n%s", d.name, r.code, r.out)
	}
	c.check(t, d.name, r, answer)
	return r
}

// summary is r's cell of the door × case table.
func (r doorRun) summary() string {
	if r.m == nil {
		return fmt.Sprintf("exit %d, no manifest", r.code)
	}
	return fmt.Sprintf("exit %d, %s netns, gate %s, network %s, manifest exit_status %d",
		r.code, r.netns, r.m.Gate.Verdict, r.m.Enforcement.Network.Status, r.m.ExitStatus)
}

// askWhileRunning asks 127.0.0.1:port every 100 ms until it answers pong
// or stop is called; stop returns the answer ("" for none), the same on
// every call.
func askWhileRunning(port int) (stop func() string) {
	quit := make(chan struct{})
	got := make(chan string, 1)
	go func() {
		for {
			select {
			case <-quit:
				got <- ""
				return
			default:
			}
			if s, _ := ask(port); strings.Contains(s, "pong") {
				got <- s
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return sync.OnceValue(func() string { close(quit); return <-got })
}

// startDoors starts the three doors, each with cat: a private containerd,
// a private podman with the hook, a host-run env with the probe built in.
func startDoors(t *testing.T, cat spec.Catalog) []door {
	// Each env publishes one catalog here (version 1), and every case
	// publishes the same next one to all three: catalog_version compares.
	e := startEnv(t, cat)
	p := startPodman(t, denyAll("doors-initial"))
	h := startHostile(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	return []door{
		{name: "containerd", probe: "/bin/probe", ws: "/workspace", envOf: e, runner: func(t *testing.T, id string, shared bool, script string) doorRun {
			flags, kind := []string(nil), spec.NetnsPrivate
			if shared {
				flags, kind = []string{"--net-host"}, spec.NetnsHost
			}
			out, code := e.run(doorsNS, id, flags, "/bin/sh", "-c", script)
			m := e.manifest(doorsNS, id)
			return doorRun{m: &m, code: code, out: out, netns: kind}
		}},
		{name: "hooks", probe: "/bin/probe", ws: "/workspace", envOf: p.e, runner: func(t *testing.T, id string, shared bool, script string) doorRun {
			flags, kind := []string{"--network=none"}, spec.NetnsPrivate
			if shared {
				flags, kind = []string{"--network=host"}, spec.NetnsHost
			}
			out, code := p.run(id, flags, "/bin/sh", "-c", script)
			_, m := p.lastOperation(t)
			p.finishedAtPoststop(t, m)
			return doorRun{m: m, code: code, out: out, netns: kind}
		}},
		// A host run's sockets are always in the host's netns.
		{name: "hostrun", probe: h.probe, ws: ".", envOf: h.env, runner: func(t *testing.T, id string, shared bool, script string) doorRun {
			r := h.run(hostNobody, []string{"--workspace", h.workspace(nil)}, "sh", "-c", script)
			return doorRun{m: r.manifest, code: r.code, out: r.stdout + r.stderr, netns: spec.NetnsHost}
		}},
	}
}

// doorsCatalog routes every door to the contract named route by its safe
// default (no inference in any door, so admission reads the same):
// containerd's namespace doorsNS, the OCI hooks runtime, and host runs as
// nobody.
func doorsCatalog(contracts []spec.Contract, route string) spec.Catalog {
	return catalogOf(contracts,
		selector(doorsNS, nil, route),
		spec.Selector{ID: "doors-hooks", Match: spec.SelectorMatch{Runtime: hooks.Runtime}, SafeDefault: route},
		spec.Selector{ID: "doors-host", Match: spec.SelectorMatch{Runtime: "host", User: "nobody"}, SafeDefault: route})
}

func containsContract(cs []spec.Contract, id string) bool {
	for _, c := range cs {
		if c.ID == id {
			return true
		}
	}
	return false
}

// doorCases are the contracts and workloads every door runs. Servers are
// on 127.0.0.1 of the host's netns: deniedPort and otherPort must never
// see a connection, allowPort one per door.
func doorCases(deniedPort, allowPort, otherPort, servePort int, deniedSeen, allowSeen, otherSeen *atomic.Int32) []doorCase {
	deny := spec.Contract{ID: "doors-deny", Version: 1, Deadline: "2m", Network: spec.Network{Mode: spec.NetworkDenyAll}}
	allow := spec.Contract{ID: "doors-allow", Version: 1, Deadline: "2m", Network: spec.Network{Mode: spec.NetworkAllowExact,
		Allow: []spec.AllowRule{{IP: "127.0.0.1", Proto: spec.ProtoTCP, Port: allowPort}}}}
	serve := spec.Contract{ID: "doors-serve", Version: 1, Deadline: "2m", Network: spec.Network{Mode: spec.NetworkDenyAll,
		Serve: []spec.ServeRule{{Proto: spec.ProtoTCP, Port: servePort}}}}
	result := spec.Contract{ID: "doors-result", Version: 1, Deadline: "2m", Network: spec.Network{Mode: spec.NetworkDenyAll},
		Workspace: "/workspace", Products: []spec.Product{{Class: spec.ClassStructuredResult, Slot: "out/result.json", MaxBytes: 65536, Modes: []string{"0644"}}}}
	good := `{"ok":true}`
	wantExit := func(t *testing.T, d string, r doorRun, want int) {
		t.Helper()
		if r.code != want {
			t.Errorf("%s: exit %d, want %d\n%s", d, r.code, want, r.out)
		}
	}
	noneSeen := func(t *testing.T, d string) {
		t.Helper()
		if n, m := deniedSeen.Load(), otherSeen.Load(); n != 0 || m != 0 {
			t.Errorf("%s: a denied server saw a connection (denied %d, other %d)", d, n, m)
		}
	}
	var allowedBefore int32
	return []doorCase{
		{name: "deny_all", contract: deny, shared: true,
			// The script's own exit says whether the connect got through.
			script: fmt.Sprintf("if {probe} connect tcp 127.0.0.1:%d; then exit 3; fi; exit 0", deniedPort),
			check: func(t *testing.T, d string, r doorRun, _ string) {
				wantExit(t, d, r, 0)
				noneSeen(t, d)
			}},
		{name: "allow_exact", contract: allow, shared: true,
			script: fmt.Sprintf("{probe} connect tcp 127.0.0.1:%d || exit 3; if {probe} connect tcp 127.0.0.1:%d; then exit 4; fi; exit 0", allowPort, otherPort),
			check: func(t *testing.T, d string, r doorRun, _ string) {
				wantExit(t, d, r, 0)
				noneSeen(t, d)
				if n := allowSeen.Load(); n != allowedBefore+1 {
					t.Errorf("%s: the allowed server saw %d connections, want 1", d, n-allowedBefore)
				}
				allowedBefore = allowSeen.Load()
			}},
		{name: "serve", contract: serve, shared: true, serve: servePort,
			// Listens for a window the client's asks fall in, then ends by itself.
			script: fmt.Sprintf("{probe} serve %d & s=$!; sleep 6; kill $s; wait $s; exit 0", servePort),
			check: func(t *testing.T, d string, r doorRun, answer string) {
				wantExit(t, d, r, 0)
				if !strings.Contains(answer, "pong") {
					t.Errorf("%s: the served port %d never answered the client on the host", d, servePort)
				}
			}},
		{name: "product_pass", contract: result,
			script: "mkdir -p {ws}/out && {probe} write {ws}/out/result.json '" + good + "'",
			check: func(t *testing.T, d string, r doorRun, _ string) {
				wantExit(t, d, r, 0)
				if r.m == nil {
					return
				}
				if p := product(*r.m, "out/result.json"); r.m.Gate.Verdict != spec.VerdictPass || p == nil || p.SHA256 != hexSum([]byte(good)) {
					t.Errorf("%s: gate %+v, product %+v: want pass with the sha256 of %s", d, r.m.Gate, p, good)
				}
			}},
		{name: "product_fail", contract: result,
			script: "mkdir -p {ws}/out && {probe} write {ws}/out/result.json 'not json'",
			check: func(t *testing.T, d string, r doorRun, _ string) {
				// A host run reports a failed gate as its own status
				// (123); the container doors report the workload's.
				want := 0
				if d == "hostrun" {
					want = 123
				}
				wantExit(t, d, r, want)
				if r.m == nil {
					return
				}
				if r.m.Gate.Verdict != spec.VerdictFail || !hasRule(*r.m, "invalid_json") {
					t.Errorf("%s: gate %+v: want fail with invalid_json", d, r.m.Gate)
				}
			}},
	}
}
