package evidence

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/kerneltest/tabletest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/nflog"
	"github.com/gensee/gensee/shim/watchdog"
	"github.com/gensee/gensee/spec"
)

// The root tests run on the real clock, not in a synctest bubble: their
// sensors read the kernel (netlink, conntrack, cgroupfs, /proc), and a
// goroutine in a system call is not durably blocked, so a bubble's fake
// time would not stand for what the kernel did meanwhile. They wait for
// what happened (a report, a count of polls) with a bounded deadline.

// goRun runs fn until cleanup, failing the test if it returns an error.
func goRun(t *testing.T, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sensor: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("sensor did not stop")
		}
	})
}

// TestRootTableTampered: flushing or deleting the table from outside is
// reported within 2 s, by the monitor alone and by the read-back alone.
func TestRootTableTampered(t *testing.T) {
	roottest.Require(t)
	for _, c := range []struct {
		name     string
		interval time.Duration
		tamper   func(e *tabletest.Env) []string
		want     string
	}{
		{"monitor flush", time.Hour, func(e *tabletest.Env) []string { return []string{"flush", "table", "inet", e.Plan.Table} }, "missing"},
		{"monitor delete", time.Hour, func(e *tabletest.Env) []string { return []string{"delete", "table", "inet", e.Plan.Table} }, "table inet " + "%s is missing"},
		{"read-back only insert", DefaultInterval, func(e *tabletest.Env) []string {
			return []string{"insert", "rule", "inet", e.Plan.Table, "output", "accept"}
		}, "extra rule"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := tabletest.New(t, spec.Network{Mode: spec.NetworkDenyAll})
			w := NewTableWatcher(e.NS.FD, e.Plan)
			w.Interval = c.interval
			if strings.HasPrefix(c.name, "read-back only") {
				w.src = noMonitor{w.src} // as if every monitor message were lost
			}
			w.OnError = func(err error) { t.Logf("watcher: %v", err) }
			out := make(chan Drift, 16)
			goRun(t, func(ctx context.Context) error { return w.Run(ctx, func(d Drift) { out <- d }) })
			select {
			case d := <-out:
				t.Fatalf("drift before tampering: %+v", d)
			case <-time.After(300 * time.Millisecond):
			}
			start := time.Now()
			e.NS.Nft(t, c.tamper(e)...)
			want := c.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, e.Plan.Table)
			}
			select {
			case d := <-out:
				t.Logf("after %v: %s", time.Since(start).Round(time.Millisecond), d.Detail)
				if !strings.Contains(d.Detail, want) {
					t.Errorf("drift %q lacks %q", d.Detail, want)
				}
				if c.interval == time.Hour && !strings.Contains(d.Detail, `"nft"`) {
					t.Errorf("monitor drift %q does not name nft", d.Detail)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("no drift within 2 s")
			}
		})
	}
}

// TestRootTableDialAhead: a watcher whose connection was opened before
// the table's own commits (DialAhead) and subscribed after them hears
// none of them, and hears the next one. Two commits before the
// subscription add and remove a chain of the table: heard, they would
// be reported as a change that left the table matching its plan.
func TestRootTableDialAhead(t *testing.T) {
	roottest.Require(t)
	e := tabletest.New(t, spec.Network{Mode: spec.NetworkDenyAll})
	w := NewTableWatcher(e.NS.FD, e.Plan)
	w.Interval = time.Hour // the monitor alone
	w.OnError = func(err error) { t.Logf("watcher: %v", err) }
	w.DialAhead()
	e.NS.Nft(t, "add", "chain", "inet", e.Plan.Table, "extra")
	e.NS.Nft(t, "delete", "chain", "inet", e.Plan.Table, "extra")
	if err := w.Subscribe(); err != nil {
		t.Fatal(err)
	}
	m, err := netpolicy.ReadBackAt(context.Background(), e.NS.FD, e.Plan)
	if err != nil {
		t.Fatal(err)
	}
	w.Seed(m)
	out := make(chan Drift, 16)
	goRun(t, func(ctx context.Context) error { return w.Run(ctx, func(d Drift) { out <- d }) })
	select {
	case d := <-out:
		t.Fatalf("heard a commit made before the subscription: %s", d.Detail)
	case <-time.After(300 * time.Millisecond):
	}
	e.NS.Nft(t, "flush", "table", "inet", e.Plan.Table)
	select {
	case d := <-out:
		if !strings.Contains(d.Detail, "missing") {
			t.Errorf("drift %q does not say what is missing", d.Detail)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the commit after the subscription was not heard within 2 s")
	}
}

// TestRootDenyThenReach wires the sensors to a watchdog as the shim does:
// a denied connect (NFLOG) puts the target on the watch; the host removes
// the deny rule; the container reaches the target (conntrack) and
// deny_then_reach fires once; the same flow never fires again.
func TestRootDenyThenReach(t *testing.T) {
	roottest.Require(t)
	e := tabletest.New(t, spec.Network{Mode: spec.NetworkAllowExact, Allow: []spec.AllowRule{{IP: "192.0.2.55", Proto: spec.ProtoTCP, Port: 443}}})
	const port = 18080
	target := fmt.Sprintf("127.0.0.1:%d/tcp", port)
	e.NS.EchoTCP(t, fmt.Sprintf("127.0.0.1:%d", port))

	wd := watchdog.New(watchdog.Config{OperationID: e.Plan.OperationID, Table: e.Plan.Table, DenyRule: e.Plan.Mode, Allowed: "192.0.2.55:443/tcp"})
	var mu sync.Mutex
	var findings []spec.Finding
	fold := func(r watchdog.Result) {
		mu.Lock()
		defer mu.Unlock()
		findings = append(findings, r.Findings...)
	}
	r, err := nflog.Open(e.NS.FD, e.Plan.LogGroup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	attempts := make(chan nflog.Attempt, 64)
	goRun(t, func(ctx context.Context) error { return r.Run(ctx, attempts) })
	goRun(t, func(ctx context.Context) error {
		for {
			select {
			case a := <-attempts:
				fold(wd.Denied(a.Target, a.At, time.Now()))
			case <-ctx.Done():
				return nil
			}
		}
	})
	fp := NewFlowPoller(e.NS.FD)
	fp.Interval = 100 * time.Millisecond
	var polls atomic.Int64
	watched := func() []string { polls.Add(1); return wd.Watched() }
	goRun(t, func(ctx context.Context) error {
		return fp.Run(ctx, watched, func(rc Reach) { fold(wd.Reached(rc.Target, rc.Detail, rc.At, time.Now())) })
	})

	connect := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo ping >&3 && read -t 3 line <&3 && echo "got $line"`, port)
	if out := e.Sh(t, "timeout 1 bash -c '"+connect+"'"); strings.Contains(out, "got ping") {
		t.Fatalf("connect was not denied: %s", out)
	}
	waitFor(t, 2*time.Second, func() bool { return len(wd.Watched()) == 1 && wd.Watched()[0] == target }, "target on the watch")

	// As the host: remove the log and deny rules.
	listing := e.NS.Nft(t, "-a", "list", "chain", "inet", e.Plan.Table, "output")
	handles := regexp.MustCompile(`comment "gensee: (?:log denied|deny[^"]*)" # handle (\d+)`).FindAllStringSubmatch(listing, -1)
	if len(handles) < 2 {
		t.Fatalf("no log and deny rules in\n%s", listing)
	}
	for _, m := range handles {
		e.NS.Nft(t, "delete", "rule", "inet", e.Plan.Table, "output", "handle", m[1])
	}
	if out := e.Sh(t, "timeout 5 bash -c '"+connect+"; sleep 1'"); !strings.Contains(out, "got ping") {
		t.Fatalf("connect after the rule was removed failed: %s", out)
	}
	waitFor(t, 3*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(findings) > 0 }, "deny_then_reach")
	// Several more polls see the same flow: wait for the polls, not for a
	// time a loaded machine may not give them.
	after := polls.Load()
	waitFor(t, 5*time.Second, func() bool { return polls.Load() >= after+5 }, "five more polls")
	mu.Lock()
	defer mu.Unlock()
	if len(findings) != 1 || findings[0].Signature != watchdog.SignatureDenyThenReach {
		t.Fatalf("findings %+v, want one deny_then_reach", findings)
	}
	t.Logf("finding: %s", findings[0].Detail)
	if a, set := wd.Attention(); !set || len(a.Findings) != 1 {
		t.Errorf("attention %+v", a)
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noMonitor is a tableSource whose subscription always fails.
type noMonitor struct{ tableSource }

func (noMonitor) Monitor() (<-chan generation, func(), error) {
	return nil, nil, fmt.Errorf("monitor disabled by the test")
}

// TestRootBindingEscape: a process of the container moved out of the cgroup
// the rules match is reported exactly once, naming its pid and where it
// went: a member of the cgroup (followed from cgroup.procs, the host's pid
// namespace), and a process never seen in the cgroup but in the container's
// own pid namespace (found by the namespace scan).
func TestRootBindingEscape(t *testing.T) {
	roottest.Require(t)
	for _, c := range []struct {
		name   string
		newNS  bool
		before bool // moved out before the poller starts
	}{
		{"member moved out, host pid namespace", false, false},
		{"child moved out before the first poll, own pid namespace", true, true},
		{"child moved out while polled, own pid namespace", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cg := kerneltest.NewCgroup(t)
			outside := cg.Path + "-outside"
			outsideDir := kerneltest.MakeCgroup(t, cg.H, outside)
			id, err := cg.H.ID(cg.Path)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sleep", "600")
			if c.newNS {
				cmd = exec.Command("sh", "-c", "sleep 600 & wait")
				cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
			}
			if err := kerneltest.IntoCgroup(t, cmd, cg.Dir); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			init := cmd.Process.Pid
			escapee := init
			if c.newNS {
				waitFor(t, 2*time.Second, func() bool {
					pids, _ := cg.H.Procs(cg.Path)
					for _, p := range pids {
						if p != init {
							escapee = p
						}
					}
					return escapee != init
				}, "the child of sh")
			}
			st, err := cgroup.ReadStat(init)
			if err != nil {
				t.Fatal(err)
			}
			move := func() {
				if err := os.WriteFile(filepath.Join(outsideDir, "cgroup.procs"), []byte(strconv.Itoa(escapee)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.before {
				move()
			}
			p := NewBindingPoller(cg.H, netpolicy.CgroupRef{Path: cg.Path, ID: id, Level: cgroup.Level(cg.Path)}, cgroup.Proc{PID: init, Start: st.Start})
			t.Log("scope: " + p.Scope())
			if c.newNS && !strings.Contains(p.Scope(), "its own") {
				t.Fatalf("scope %q: want the container's own pid namespace scanned", p.Scope())
			}
			p.Interval = 50 * time.Millisecond
			out := make(chan Unbound, 8)
			goRun(t, func(ctx context.Context) error { return p.Run(ctx, func(u Unbound) { out <- u }) })
			if !c.before {
				select {
				case u := <-out:
					t.Fatalf("unbound while bound: %+v", u)
				case <-time.After(200 * time.Millisecond):
				}
				move()
			}
			want := fmt.Sprintf("pid %d in %s", escapee, outside)
			select {
			case u := <-out:
				t.Log(u.Detail)
				if u.Target != want || u.Escape == nil || u.Escape.PID != escapee {
					t.Errorf("unbound %+v, want target %q", u, want)
				}
				if !strings.Contains(u.Detail, "outside "+cg.Path) {
					t.Errorf("detail %q", u.Detail)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("move out of the cgroup not reported")
			}
			select {
			case u := <-out:
				t.Fatalf("reported again: %+v", u)
			case <-time.After(300 * time.Millisecond):
			}
			if e := p.Escaped(); len(e) != 1 || e[0].PID != escapee {
				t.Errorf("Escaped = %v", e)
			}
		})
	}
}

// BenchmarkBindingPollHost is one poll of a container (one process in a
// test cgroup) with its own pid namespace on this host: warm (namespaces
// cached, the steady state) and cold (every pid's namespace link read).
// GENSEE_BENCH_PROCS=N starts N more host processes first, for a busy host.
func BenchmarkBindingPollHost(b *testing.B) {
	roottest.Require(b)
	if n, _ := strconv.Atoi(os.Getenv("GENSEE_BENCH_PROCS")); n > 0 {
		for i := 0; i < n; i++ {
			c := exec.Command("sleep", "600")
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Process.Kill(); c.Wait() })
		}
	}
	cg := kerneltest.NewCgroup(b)
	member := exec.Command("sleep", "600")
	if err := kerneltest.IntoCgroup(b, member, cg.Dir); err != nil {
		b.Fatal(err)
	}
	if err := member.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { member.Process.Kill(); member.Wait() })
	id, err := cg.H.ID(cg.Path)
	if err != nil {
		b.Fatal(err)
	}
	mk := func() *BindingPoller {
		p := newBindingPoller(netpolicy.CgroupRef{Path: cg.Path, ID: id}, hostProc{})
		p.idOf, p.pathOf = cg.H.ID, cgroup.PathOf
		p.members = func() ([]int, error) { return cg.H.Procs(cg.Path) }
		p.ns, p.private = 1, true // a namespace no process is in: every other pid is the host's
		return p
	}
	pids, _ := cgroup.ListPIDs()
	b.Run(fmt.Sprintf("warm/%d-pids", len(pids)), func(b *testing.B) {
		p := mk()
		for range nsRefreshPolls {
			p.check(nsScanNow) // every pid classified and its refresh spread out
		}
		for b.Loop() {
			p.check(nsScanNow)
		}
	})
	b.Run(fmt.Sprintf("cold/%d-pids", len(pids)), func(b *testing.B) {
		for b.Loop() {
			mk().check(nsScanNow)
		}
	})
}
