package nflog

import (
	"context"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/kerneltest/tabletest"
	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/spec"
)

// start opens a reader on the plan's group and runs it until cleanup.
func start(t *testing.T, e *tabletest.Env) (*Reader, <-chan Attempt) {
	t.Helper()
	r, err := Open(e.NS.FD, e.Plan.LogGroup)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Attempt, 1024)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r, out
}

// collect gathers attempts until none arrived for quiet.
func collect(out <-chan Attempt, quiet time.Duration) []Attempt {
	var as []Attempt
	for {
		select {
		case a := <-out:
			as = append(as, a)
		case <-time.After(quiet):
			return as
		}
	}
}

func TestRootAttempts(t *testing.T) {
	roottest.Require(t)
	e := tabletest.New(t, spec.Network{Mode: spec.NetworkDenyAll})
	_, out := start(t, e)

	e.Sh(t, `echo x >/dev/udp/127.0.0.1/5353`)
	e.Sh(t, `timeout 0.5 bash -c 'exec 3<>/dev/tcp/::1/8443'`)
	got := map[string]Attempt{}
	for _, a := range collect(out, 700*time.Millisecond) {
		got[a.Target] = a
	}
	for _, want := range []string{"127.0.0.1:5353/udp", "[::1]:8443/tcp"} {
		a, ok := got[want]
		if !ok {
			t.Errorf("no attempt for %s; got %v", want, got)
			continue
		}
		if a.Prefix != e.Plan.LogPrefix {
			t.Errorf("%s: prefix %q, want %q", want, a.Prefix, e.Plan.LogPrefix)
		}
		if d := time.Since(a.At); d < 0 || d > 10*time.Second {
			t.Errorf("%s: at %v", want, a.At)
		}
	}
}

// TestRootFloodIsSampled: beyond the log rule's rate limit fewer attempts
// are logged than the deny counter counts; the counter is the count.
func TestRootFloodIsSampled(t *testing.T) {
	roottest.Require(t)
	e := tabletest.New(t, spec.Network{Mode: spec.NetworkDenyAll})
	r, out := start(t, e)
	e.Sh(t, `for i in $(seq 300); do echo x >/dev/udp/127.0.0.1/9; done 2>/dev/null`)
	logged := len(collect(out, 700*time.Millisecond))
	c, err := netpolicy.ReadCounters(context.Background(), e.NS.FD, e.Plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("logged %d, deny counter %d, received %d, lost %d", logged, c.Denied.Packets, r.Received(), r.Lost())
	if logged == 0 || uint64(logged) >= c.Denied.Packets || c.Denied.Packets < 300 {
		t.Fatalf("logged %d of %d denied packets: want some, fewer than counted", logged, c.Denied.Packets)
	}
}

// TestRootSecondBindRefused: one socket per namespace binds a group.
func TestRootSecondBindRefused(t *testing.T) {
	roottest.Require(t)
	e := tabletest.New(t, spec.Network{Mode: spec.NetworkDenyAll})
	start(t, e)
	if r, err := Open(e.NS.FD, e.Plan.LogGroup); err == nil {
		r.Close()
		t.Fatal("second Open of the same group succeeded")
	} else {
		t.Logf("second Open: %v", err)
	}
}
