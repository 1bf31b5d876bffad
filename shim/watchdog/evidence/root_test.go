package evidence

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/kerneltest"
	"github.com/gensee/gensee/internal/kerneltest/tabletest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/nflog"
	"github.com/gensee/gensee/shim/watchdog"
	"github.com/gensee/gensee/spec"
)

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
	goRun(t, func(ctx context.Context) error {
		return fp.Run(ctx, wd.Watched, func(rc Reach) { fold(wd.Reached(rc.Target, rc.Detail, rc.At, time.Now())) })
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
	time.Sleep(500 * time.Millisecond) // several more polls see the same flow
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

// TestRootBindingBroken: a process of the container moved out of the cgroup
// the rules match is reported.
func TestRootBindingBroken(t *testing.T) {
	roottest.Require(t)
	e := tabletest.New(t, spec.Network{Mode: spec.NetworkDenyAll})
	dir := e.CG.Dir
	sleep := exec.Command("sleep", "30")
	if err := kerneltest.IntoCgroup(t, sleep, dir); err != nil {
		t.Fatal(err)
	}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	outside := dir + "-outside"
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sleep.Process.Kill()
		sleep.Wait()
		if err := os.Remove(outside); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	p := NewBindingPoller(e.CG.H, e.Plan.Cgroup, func() []int { return []int{sleep.Process.Pid} })
	p.Interval = 50 * time.Millisecond
	out := make(chan Unbound, 4)
	goRun(t, func(ctx context.Context) error { return p.Run(ctx, func(u Unbound) { out <- u }) })
	select {
	case u := <-out:
		t.Fatalf("unbound while bound: %+v", u)
	case <-time.After(200 * time.Millisecond):
	}
	if err := os.WriteFile(outside+"/cgroup.procs", []byte(strconv.Itoa(sleep.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-out:
		t.Log(u.Detail)
		if !strings.Contains(u.Detail, "outside "+e.CG.Path) {
			t.Errorf("detail %q", u.Detail)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("move out of the cgroup not reported")
	}
}
