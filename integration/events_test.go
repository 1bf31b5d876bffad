package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// events reads events.jsonl of ns/id.
func (e *env) events(ns, id string) []spec.Event {
	e.t.Helper()
	dir, err := record.Store{Dir: e.state}.OperationDir(e.operation(ns, id))
	must(e.t, err)
	c, err := events.Read(filepath.Join(dir, record.EventsFile))
	must(e.t, err)
	return c.Events
}

func countKind(evs []spec.Event, kind, rule string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && (rule == "" || ev.Rule == rule) {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or the time is up.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func allowServer() spec.Contract {
	return spec.Contract{ID: "allow-server", Version: 1, Network: spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{
		{IP: serverIP, Proto: spec.ProtoTCP, Port: 8080},
	}}}
}

func eventsCatalog() spec.Catalog {
	return catalogOf([]spec.Contract{denyAll("offline"), allowServer()},
		selector("it-ev", map[string]string{"build": "offline"}, "offline"),
		selector("it-evallow", map[string]string{"build": "allow-server"}, "allow-server"))
}

// TestEgressDeniedEvents: denied packets become egress_denied events with
// their target, the attempts reconcile with the deny counter, and a flood
// beyond the log's rate limit is reported as incomplete.
func TestEgressDeniedEvents(t *testing.T) {
	e := startEnv(t, eventsCatalog())
	n := newTestNet(t)
	netns := []string{"--with-ns", "network:" + n.ClientPath}
	live := e.followLive()
	if _, code := e.run("it-ev", "few", netns, "/bin/sh", "-c",
		"/bin/probe connect udp "+serverIP+":5353; /bin/probe connect udp "+serverIP+":5354; true"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	m := e.manifest("it-ev", "few")
	evs := e.events("it-ev", "few")
	for _, target := range []string{serverIP + ":5353/udp", serverIP + ":5354/udp"} {
		found := false
		for _, ev := range evs {
			found = found || (ev.Kind == spec.EventEgressDenied && ev.Target == target)
		}
		if !found {
			t.Errorf("no egress_denied event for %s in %+v", target, evs)
		}
		// The same event reached the daemon's subscribers (gensee events
		// --follow --address).
		if !live.saw(string(spec.EventEgressDenied), target) {
			t.Errorf("gensee events --follow did not print egress_denied for %s:\n%s", target, live.text())
		}
	}
	da := m.Observation.DeniedAttempts
	if !da.Complete || uint64(len(da.Items)) != m.Observation.Counters.DeniedPackets {
		t.Fatalf("attempts %d complete=%v, deny counter %d: want complete and equal", len(da.Items), da.Complete, m.Observation.Counters.DeniedPackets)
	}

	if _, code := e.run("it-ev", "flood", netns, "/bin/probe", "flood", "udp", serverIP+":5353", "500"); code != 0 {
		t.Fatalf("flood exit %d", code)
	}
	m = e.manifest("it-ev", "flood")
	if m.Observation.Counters.DeniedPackets < 500 || m.Observation.DeniedAttempts.Complete {
		t.Fatalf("flood: deny counter %d, complete %v: want >= 500 and incomplete", m.Observation.Counters.DeniedPackets, m.Observation.DeniedAttempts.Complete)
	}
	if got := countKind(e.events("it-ev", "flood"), spec.EventEgressDenied, ""); uint64(got) >= m.Observation.Counters.DeniedPackets {
		t.Fatalf("flood: %d events for %d denied packets; the log is rate-limited", got, m.Observation.Counters.DeniedPackets)
	}
}

// liveEvents is a running `gensee events --follow --address SOCK --json`.
type liveEvents struct {
	mu  sync.Mutex
	out strings.Builder
}

func (l *liveEvents) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Write(b)
}

func (l *liveEvents) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}

// saw waits up to 5 s for a printed event of kind with target.
func (l *liveEvents) saw(kind, target string) bool {
	for deadline := time.Now().Add(5 * time.Second); ; {
		for _, line := range strings.Split(l.text(), "\n") {
			var ll struct {
				Event *spec.Event `json:"event"`
			}
			if json.Unmarshal([]byte(line), &ll) == nil && ll.Event != nil && string(ll.Event.Kind) == kind && ll.Event.Target == target {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// followLive subscribes to the daemon's /gensee/ events through the CLI
// until the test ends; it waits until the subscription is in place.
func (e *env) followLive() *liveEvents {
	e.t.Helper()
	l := &liveEvents{}
	cmd := exec.Command(filepath.Join(e.bin, "gensee"), "events", "--follow", "--address", e.sock, "--json")
	cmd.Stdout, cmd.Stderr = l, l
	must(e.t, cmd.Start())
	e.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// The subscription is in place once the daemon lists it: give the
	// CLI its start and the dial.
	time.Sleep(500 * time.Millisecond)
	return l
}

// runDetached starts a long-running container in the test netns.
func (e *env) runDetached(ns, id, netnsPath string, args ...string) {
	e.t.Helper()
	all := []string{"run", "-d", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, "--with-ns", "network:" + netnsPath, e.image, id}
	e.ctr(e.ns(ns), append(all, args...)...)
	e.t.Cleanup(func() {
		e.ctrErr(ns, "tasks", "kill", "-s", "SIGKILL", id)
		waitStopped(e, ns, id)
		e.ctrErr(ns, "tasks", "delete", id)
		e.ctrErr(ns, "containers", "delete", id)
	})
}

func (e *env) attention(ns, id string) (spec.Attention, bool) {
	a, ok, err := events.ReadAttention(record.Store{Dir: e.state}, e.operation(ns, id))
	must(e.t, err)
	return a, ok
}

// nftIn runs nft in the test container's netns (nsenter keeps /sys).
func nftIn(t *testing.T, n *testNet, args ...string) string {
	out, err := exec.Command("nsenter", append([]string{"--net=" + n.ClientPath, "nft"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestTableTampered: the host flushes the operation's table while the task
// runs: control_defeat within 2 s, attention set, an error line logged, and
// the task keeps running. The finding outlives the task: the manifest
// names it and says drift_detected, attention list shows it after the
// task was deleted, retention keeps the operation until a person clears
// it, and the clearing is recorded.
func TestTableTampered(t *testing.T) {
	e := startEnv(t, eventsCatalog())
	e.writeOperatorConfig("[retention]\nmax_age = \"1s\"\n")
	n := newTestNet(t)
	e.runDetached("it-ev", "tamper", n.ClientPath, "/bin/sleep", "300")
	table := e.admissionRecord("it-ev", "tamper")["table"].(string)
	time.Sleep(300 * time.Millisecond) // the watcher is up once Start returned; give it its first read
	start := time.Now()
	nftIn(t, n, "flush", "table", "inet", table)
	waitFor(t, 2*time.Second, "attention after the table was flushed", func() bool {
		a, ok := e.attention("it-ev", "tamper")
		return ok && len(a.Findings) > 0 && a.Findings[0].Signature == "table_tampered"
	})
	t.Logf("control_defeat %s after the flush", time.Since(start))
	if out := e.ctr("it-ev", "tasks", "ls"); !strings.Contains(lineOf(out, "tamper"), "RUNNING") {
		t.Fatalf("the task did not keep running:\n%s", out)
	}
	if countKind(e.events("it-ev", "tamper"), spec.EventControlDefeat, "table_tampered") != 1 {
		t.Fatalf("want exactly one table_tampered control_defeat event: %+v", e.events("it-ev", "tamper"))
	}
	// The shim's log reaches containerd's through a pipe the daemon
	// copies: the line may land a moment after the attention record.
	waitFor(t, 3*time.Second, "an error line naming the signature in the shim log", func() bool {
		log, _ := os.ReadFile(filepath.Join(e.dir, "containerd.log"))
		return strings.Contains(string(log), "control_defeat") && strings.Contains(string(log), "table_tampered")
	})
	e.ctr("it-ev", "tasks", "kill", "-s", "SIGKILL", "tamper")
	waitStopped(e, "it-ev", "tamper")
	e.ctr("it-ev", "tasks", "delete", "tamper")
	if a, ok := e.attention("it-ev", "tamper"); !ok || len(a.Open()) != 1 {
		t.Fatalf("after the task ended: attention %+v (set %v), want the finding still open", a, ok)
	}
	m := e.manifest("it-ev", "tamper")
	if len(m.Findings) != 1 || m.Findings[0].Signature != "table_tampered" || m.Enforcement.Network.Status == spec.NetworkEnforced {
		t.Fatalf("manifest findings %+v, status %s: want the table_tampered finding and not enforced", m.Findings, m.Enforcement.Network.Status)
	}
	gensee := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(e.bin, "gensee"), append(args, "--config", e.cfgPath)...).CombinedOutput()
		return string(out), err
	}
	op := e.operation("it-ev", "tamper")
	if out, _ := gensee("attention", "list"); !strings.Contains(out, op) || !strings.Contains(out, "table_tampered") {
		t.Errorf("attention list after the task ended:\n%s", out)
	}
	if out, _ := gensee("manifest", "show", "--operation", op); !strings.Contains(out, "findings (evidence that a boundary failed)") || !strings.Contains(out, "table_tampered") {
		t.Errorf("manifest show names no finding:\n%s", out)
	}
	if out, _ := gensee("boundary", "audit", "--operation", op); !strings.Contains(out, "table_tampered") {
		t.Errorf("boundary audit:\n%s", out)
	}
	time.Sleep(1100 * time.Millisecond) // past max_age
	if out, err := gensee("prune", "--dry-run", "--json"); err != nil || strings.Contains(out, op) || !strings.Contains(out, `"attention": 1`) {
		t.Errorf("prune --dry-run past max_age (%v): want the operation kept for its open finding:\n%s", err, out)
	}
	if out, err := gensee("attention", "clear", "--operation", op, "--note", "the test flushed it"); err != nil {
		t.Fatalf("attention clear: %v\n%s", err, out)
	}
	if out, _ := gensee("attention", "list", "--all"); !strings.Contains(out, op) || !strings.Contains(out, " by uid 0") {
		t.Errorf("attention list --all after the clearing:\n%s", out)
	}
	if out, _ := gensee("prune", "--dry-run", "--json"); !strings.Contains(out, op) {
		t.Errorf("prune --dry-run after the clearing: want the operation prunable:\n%s", out)
	}
}

// TestDenyThenReach: a target is denied; the host then removes the deny
// rules and the container reaches it: deny_then_reach fires once, and the
// same evidence never fires again.
func TestDenyThenReach(t *testing.T) {
	e := startEnv(t, eventsCatalog())
	n := newTestNet(t)
	n.listenTCP(serverIP + ":8080")
	l := n.listenTCP(serverIP + ":8081")
	e.runDetached("it-evallow", "reach", n.ClientPath, "/bin/sh", "-c",
		"while true; do /bin/probe connect tcp "+serverIP+":8080; /bin/probe connect tcp "+serverIP+":8081; sleep 0.3; done")
	table := e.admissionRecord("it-evallow", "reach")["table"].(string)
	waitFor(t, 10*time.Second, "an egress_denied event for :8081", func() bool {
		return countKind(e.events("it-evallow", "reach"), spec.EventEgressDenied, "") > 0
	})
	// As the host: delete every rule that drops or logs, leaving the accepts.
	listing := nftIn(t, n, "-a", "list", "chain", "inet", table, "output")
	for _, line := range strings.Split(listing, "\n") {
		if (strings.Contains(line, "drop") || strings.Contains(line, " log ")) && strings.Contains(line, "# handle ") {
			h := line[strings.LastIndex(line, "# handle ")+len("# handle "):]
			nftIn(t, n, "delete", "rule", "inet", table, "output", "handle", strings.TrimSpace(h))
		}
	}
	waitFor(t, 10*time.Second, "the container reaching :8081", func() bool { return l.accepted.Load() > 0 })
	waitFor(t, 5*time.Second, "deny_then_reach", func() bool {
		return countKind(e.events("it-evallow", "reach"), spec.EventControlDefeat, "deny_then_reach") > 0
	})
	time.Sleep(3 * time.Second) // more reaches of the same target: the spent evidence must not fire again
	if got := countKind(e.events("it-evallow", "reach"), spec.EventControlDefeat, "deny_then_reach"); got != 1 {
		t.Fatalf("deny_then_reach fired %d times, want once", got)
	}
	if out := e.ctr("it-evallow", "tasks", "ls"); !strings.Contains(lineOf(out, "reach"), "RUNNING") {
		t.Fatalf("the task did not keep running:\n%s", out)
	}
	e.ctr("it-evallow", "tasks", "kill", "-s", "SIGKILL", "reach")
	waitStopped(e, "it-evallow", "reach")
	m := e.manifest("it-evallow", "reach")
	// The deny rules were deleted: the watcher saw the table drift too,
	// which outranks the defeat in the status; both findings are named.
	if m.Enforcement.Network.Status == spec.NetworkEnforced || len(m.Findings) == 0 {
		t.Fatalf("manifest status %s, findings %+v: want not enforced, with the findings", m.Enforcement.Network.Status, m.Findings)
	}
	found := false
	for _, f := range m.Findings {
		found = found || f.Signature == "deny_then_reach"
	}
	if !found {
		t.Fatalf("manifest findings %+v lack deny_then_reach", m.Findings)
	}
}

// TestDenialLoop: ten retries of one denied connect give one hint_loop; an
// allowed flow in between starts a new loop. Guidance never changes the
// task's fate or status.
func TestDenialLoop(t *testing.T) {
	e := startEnv(t, eventsCatalog())
	n := newTestNet(t)
	n.listenTCP(serverIP + ":8080")
	netns := []string{"--with-ns", "network:" + n.ClientPath}
	retries := "for i in 1 2 3 4 5 6 7 8 9 10; do /bin/probe connect udp " + serverIP + ":9999; done; exit 3"
	if _, code := e.run("it-ev", "loop", netns, "/bin/sh", "-c", retries); code != 3 {
		t.Fatalf("exit %d, want the workload's own 3", code)
	}
	if got := countKind(e.events("it-ev", "loop"), spec.EventHintLoop, ""); got != 1 {
		t.Fatalf("%d hint_loop events for ten retries, want 1", got)
	}
	twoLoops := "for i in 1 2 3 4 5; do /bin/probe connect udp " + serverIP + ":9999; done; " +
		"/bin/probe connect tcp " + serverIP + ":8080; sleep 3; " + // the flow pollers must see it first, even on a loaded machine
		"for i in 1 2 3 4 5; do /bin/probe connect udp " + serverIP + ":9999; done; true"
	if _, code := e.run("it-evallow", "loops", netns, "/bin/sh", "-c", twoLoops); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if evs := e.events("it-evallow", "loops"); countKind(evs, spec.EventHintLoop, "") != 2 {
		t.Fatalf("%d hint_loop events with an allowed flow between two loops, want 2: %+v", countKind(evs, spec.EventHintLoop, ""), evs)
	}
}
