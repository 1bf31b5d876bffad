package service

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/sys/reaper"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// reapChildren does what the shim's main loop does: reap on SIGCHLD and
// hand exits to reaper.Default's subscribers.
func reapChildren(t *testing.T) {
	ch := make(chan os.Signal, 32)
	signal.Notify(ch, syscall.SIGCHLD)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				reaper.Reap()
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { signal.Stop(ch); close(done) })
}

func TestRunHelperOutputAndStatus(t *testing.T) {
	reapChildren(t)
	out, err := runHelper([]string{"/bin/sh", "-c", "cat; echo done"}, nil, []byte("in "), 1<<10, 10*time.Second)
	if err != nil || string(out) != "in done\n" {
		t.Fatalf("out %q, err %v", out, err)
	}
	if _, err := runHelper([]string{"/bin/sh", "-c", "echo boom >&2; exit 3"}, nil, nil, 1<<10, 10*time.Second); err == nil || !strings.Contains(err.Error(), "exited 3: boom") {
		t.Fatalf("failing helper: %v", err)
	}
	out, _ = runHelper([]string{"/bin/sh", "-c", "yes | head -c 100000"}, nil, nil, 10, 10*time.Second)
	if len(out) != 10 {
		t.Fatalf("output not bounded: %d bytes", len(out))
	}
}

// A hung gate costs its time limit and a failed verdict, never a hang.
func TestRunHelperTimeout(t *testing.T) {
	reapChildren(t)
	start := time.Now()
	_, err := runHelper([]string{"/bin/sleep", "30"}, nil, nil, 1<<10, 200*time.Millisecond)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	c := spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}}
	op := &operation{id: "0123456789abcdef0123456789abcdef", contract: c,
		admission: &spec.Admission{OperationID: "0123456789abcdef0123456789abcdef", AdmissionDecision: spec.AdmissionDecision{Contract: c}}}
	m := op.manifest(engine.Facts{Exit: engine.Exit{GateRan: true, GateErr: errors.New("gate helper: " + err.Error())}})
	if m.Gate.Verdict != spec.VerdictFail || len(m.Gate.Violations) != 1 || m.Gate.Violations[0].Rule != "gate_error" {
		t.Fatalf("gate %+v, want a failed verdict naming gate_error", m.Gate)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("manifest of a timed-out gate does not validate: %v", err)
	}
}

// The helper's limit is what is left of the gate's when its context ends
// sooner (the baseline pass took the rest), never more than the gate's.
func TestHelperLimit(t *testing.T) {
	if got := helperLimit(context.Background(), time.Minute); got != time.Minute {
		t.Fatalf("no deadline: %s, want the gate's limit", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if got := helperLimit(ctx, time.Minute); got > time.Second || got < 500*time.Millisecond {
		t.Fatalf("1 s left of the gate's limit: %s", got)
	}
	if got := helperLimit(ctx, 100*time.Millisecond); got != 100*time.Millisecond {
		t.Fatalf("a shorter limit: %s", got)
	}
	done, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if got := helperLimit(done, time.Minute); got != 0 {
		t.Fatalf("past the deadline: %s, want 0", got)
	}
	// No gate_timeout configured: the exit path's default bounds both.
	if got := helperLimit(context.Background(), engine.GateLimitFor(0)); got != engine.DefaultGateLimit {
		t.Fatalf("no gate_timeout, no deadline: %s, want %s", got, engine.DefaultGateLimit)
	}
	if got := helperLimit(ctx, engine.GateLimitFor(0)); got > time.Second || got < 500*time.Millisecond {
		t.Fatalf("no gate_timeout, 1 s left: %s", got)
	}
}

// Through the exit path (engine.Finish, as exitPipelineFor wires it): a
// gate whose limit passed before its helper was handed its input fails
// naming the limit and its setting, without waiting for the helper, which
// never reads an input; a gate stopped otherwise does not blame the limit.
// With no gate_timeout set, the helper has the default limit, not none.
func TestHelperGateLimit(t *testing.T) {
	reapChildren(t)
	saved := gateHelperCommand
	t.Cleanup(func() { gateHelperCommand = saved })
	dir := t.TempDir()
	got, pids := filepath.Join(dir, "input"), filepath.Join(dir, "pids")
	spawned := 0
	gateHelperCommand = func() (*exec.Cmd, func(), error) {
		spawned++
		return exec.Command("/bin/sh", "-c", `echo $$ >>"$1"; cat >"$0.part"; mv "$0.part" "$0"; exec sleep 30`, got, pids), func() {}, nil
	}
	t.Cleanup(func() { // the helpers let go are killed 5 s on; not left behind by a shorter test binary
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	run := func(ctx context.Context, timeout time.Duration, upper string, baseline bool) *spec.GateResult {
		f := newFixture(t, 0)
		op := f.op
		op.diff = diffSource{Upper: upper, Lowers: []string{t.TempDir()}}
		op.store = record.Store{Dir: t.TempDir()}
		op.cfg.GateTimeout = config.Duration{Duration: timeout}
		op.exit.GateLimit = exitPipelineFor(op).GateLimit // production's wiring
		op.exit.Gate = &helperGate{op: op}
		if baseline {
			if err := op.takeBaseline(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(upper, "written-by-the-workload"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m, _ := op.exit.Run(ctx, engine.Facts{Started: time.Now()})
		if m == nil {
			t.Fatal("no manifest")
		}
		return &m.Gate
	}
	// detail is a failed gate's one violation, or "" when it did not fail.
	detail := func(g *spec.GateResult) string {
		if g.Verdict != spec.VerdictFail || len(g.Violations) != 1 {
			return ""
		}
		return g.Violations[0].Detail
	}
	// A gate_timeout that passes at once: the gate's own limit.
	begin := time.Now()
	if g := run(context.Background(), time.Nanosecond, t.TempDir(), false); !strings.Contains(detail(g), "limit 1ns (gate_timeout)") ||
		!strings.Contains(detail(g), "before its helper was handed its input") {
		t.Fatalf("gate %+v, want a failed gate naming gate_timeout", g)
	}
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("Run took %s: it waited for the helper it let go", d)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(got); err == nil {
			if len(b) != 0 {
				t.Fatalf("the helper read %q, want no input", b)
			}
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the helper let go never saw its input end: %v", err)
		}
	}
	// The door's own context ended (cancelled, or past a deadline of its
	// own): stopped, never blamed on gate_timeout.
	stopped, stop := context.WithCancel(context.Background())
	stop()
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	for _, ctx := range []context.Context{stopped, past} {
		if g := run(ctx, time.Minute, t.TempDir(), false); strings.Contains(detail(g), "gate_timeout") ||
			!strings.Contains(detail(g), "stopped: before its helper was handed its input") {
			t.Fatalf("a gate its door stopped: %+v, want no blame on gate_timeout", g)
		}
	}
	// The limit passed during the pass in the shim over an upper dir with
	// a baseline: the verdict names it, and no helper is started.
	before := spawned
	if g := run(context.Background(), time.Nanosecond, t.TempDir(), true); !strings.Contains(detail(g), "limit 1ns (gate_timeout): during its pass in the shim") ||
		spawned != before {
		t.Fatalf("the baseline pass past the limit: %+v, %d helpers started", g, spawned-before)
	}
	// No gate_timeout set, a helper that answers: the default limit, under
	// the exit path's context, leaves it time to.
	useHelper(t, warmHelperScript)
	ctx, cancel2 := context.WithTimeout(context.Background(), engine.DefaultGateLimit)
	defer cancel2()
	if g := run(ctx, 0, t.TempDir(), false); g.Verdict != spec.VerdictPass {
		t.Fatalf("no gate_timeout set: %+v, want the helper's pass", g)
	}
}

// The manifest of a never-started task says the gate did not run and never
// claims counters it did not read.
func TestManifestNotRun(t *testing.T) {
	c := spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}}
	op := &operation{contract: c, admission: &spec.Admission{Table: "gensee_0123456789ab", AdmissionDecision: spec.AdmissionDecision{Contract: c}}}
	m := op.manifest(engine.Facts{})
	if m.Gate.Verdict != spec.VerdictNotRun || m.Observation.Counters.Error == "" || m.Observation.DeniedAttempts.Complete {
		t.Fatalf("manifest of a never-started task: gate %+v counters %+v attempts %+v", m.Gate, m.Observation.Counters, m.Observation.DeniedAttempts)
	}
	if m.Promoted || m.SemanticallyVerified {
		t.Fatal("manifest claims promotion or semantic verification")
	}
}

// A whole result read to EOF is the helper's answer, without waiting for
// the reaper; a partial one waits for the exit status, which names the
// failure.
func TestGateHelperResultAtEOF(t *testing.T) {
	reapChildren(t)
	saved := gateHelperCommand
	t.Cleanup(func() { gateHelperCommand = saved })
	run := func(script string) (*gate.Result, time.Duration, error) {
		gateHelperCommand = func() (*exec.Cmd, func(), error) { return exec.Command("/bin/sh", "-c", script), func() {}, nil }
		h, err := spawnGateHelper(false)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := h.run([]byte("{}"), 10*time.Second)
		return res, time.Since(start), err
	}
	// stdout closed, then the exit comes late: the result is taken at EOF.
	res, took, err := run(`cat >/dev/null; echo '{"verdict":"pass"}'; exec >&-; sleep 1`)
	if err != nil || res == nil || res.Verdict != gate.Pass {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if took > 900*time.Millisecond {
		t.Fatalf("took %s: waited for the exit, not the result", took)
	}
	// A torn result: the exit status and stderr say why.
	res, _, err = run(`cat >/dev/null; printf '{"verdict":'; echo boom >&2; exit 1`)
	if res != nil || err == nil || !strings.Contains(err.Error(), "exited 1: boom") {
		t.Fatalf("torn result: %+v, %v", res, err)
	}
	// Exit 0 with garbage: a decode error.
	res, _, err = run(`cat >/dev/null; echo nope`)
	if res != nil || err == nil || !strings.Contains(err.Error(), "decode gate result") {
		t.Fatalf("garbage result: %+v, %v", res, err)
	}
}
