package service

import (
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/sys/reaper"

	"github.com/gensee/gensee/shim/effect"
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
	op := &operation{id: "0123456789abcdef0123456789abcdef", admission: &spec.Admission{}, contract: spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}}}
	m := op.manifest(exitFacts{Exit: effect.Exit{GateRan: true, GateErr: errors.New("gate helper: " + err.Error())}})
	if m.Gate.Verdict != spec.VerdictFail || len(m.Gate.Violations) != 1 || m.Gate.Violations[0].Rule != "gate_error" {
		t.Fatalf("gate %+v, want a failed verdict naming gate_error", m.Gate)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("manifest of a timed-out gate does not validate: %v", err)
	}
}

// The manifest of a never-started task says the gate did not run and never
// claims counters it did not read.
func TestManifestNotRun(t *testing.T) {
	op := &operation{admission: &spec.Admission{Table: "gensee_0123456789ab"}, contract: spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}}}
	m := op.manifest(exitFacts{})
	if m.Gate.Verdict != spec.VerdictNotRun || m.Observation.Counters.Error == "" || m.Observation.DeniedAttempts.Complete {
		t.Fatalf("manifest of a never-started task: gate %+v counters %+v attempts %+v", m.Gate, m.Observation.Counters, m.Observation.DeniedAttempts)
	}
	if m.Promoted || m.SemanticallyVerified {
		t.Fatal("manifest claims promotion or semantic verification")
	}
}
