package service

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/ttrpc"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// warmCodecs runs to its end on the types it names, and leaves the codecs
// working: a spec still round-trips.
func TestWarmCodecs(t *testing.T) {
	warmCodecs()
	in := specs.Spec{Version: "1.2.0", Process: &specs.Process{Args: []string{"/bin/true"}}, Linux: &specs.Linux{Seccomp: &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}}}
	b, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out specs.Spec
	if err := json.Unmarshal(b, &out); err != nil || out.Process.Args[0] != "/bin/true" || out.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Fatalf("round trip after warmCodecs: %+v, %v", out, err)
	}
}

// warmCodecs yields its processor between steps: on a single P, a
// goroutine made runnable while it works runs before it ends, not after
// (it would wait for the whole warm-up otherwise: the scheduler takes a P
// from a running goroutine only after 10 ms).
func TestWarmCodecsYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var finished atomic.Bool
	started, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		close(started) // makes this test's goroutine runnable
		warmCodecs()
		finished.Store(true)
	}()
	<-started
	if finished.Load() {
		t.Error("warmCodecs ran to its end before a runnable goroutine got the processor")
	}
	<-done
}

// Once the server is about to serve, the warm-up's yield waits for the
// first call (its P idle, free to take the accept loop) and goes on as
// soon as it comes; before the server serves, and after the first call,
// it does not wait.
func TestWarmYieldWaitsForFirstCall(t *testing.T) {
	s := newStartSignals(time.Hour)
	yielded := func() <-chan struct{} {
		c := make(chan struct{})
		go func() { s.yield(); close(c) }()
		return c
	}
	select {
	case <-yielded():
	case <-time.After(10 * time.Second):
		t.Fatal("yield waited before the server serves")
	}
	s.serve()
	y := yielded()
	select {
	case <-y:
		t.Fatal("yield did not wait for the first call once the server serves")
	case <-time.After(50 * time.Millisecond):
	}
	s.call()
	select {
	case <-y:
	case <-time.After(10 * time.Second):
		t.Fatal("yield still waiting after the first call")
	}
	select {
	case <-yielded():
	case <-time.After(10 * time.Second):
		t.Fatal("yield waited after the first call")
	}
}

// The wait is bounded: a shim no one calls finishes its warm-up.
func TestWarmYieldPauseBounded(t *testing.T) {
	s := newStartSignals(20 * time.Millisecond)
	s.serve()
	t0 := time.Now()
	s.yield()
	if d := time.Since(t0); d < 20*time.Millisecond || d > 5*time.Second {
		t.Fatalf("yield with no call took %v, want its 20ms bound", d)
	}
}

// RegisterTTRPC cues the warm-up, and the service's interceptor marks the
// first call and passes the call through unchanged.
func TestWarmStartCues(t *testing.T) {
	defer func(prev *startSignals) { warmStart = prev }(warmStart)
	warmStart = newStartSignals(time.Hour)
	srv, err := ttrpc.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s := &service{}
	if err := s.RegisterTTRPC(srv); err != nil {
		t.Fatal(err)
	}
	select {
	case <-warmStart.serving:
	default:
		t.Fatal("RegisterTTRPC did not cue the warm-up")
	}
	select {
	case <-warmStart.called:
		t.Fatal("called before any call")
	default:
	}
	want := errors.New("the method's own error")
	got, err := s.UnaryServerInterceptor()(context.Background(), func(any) error { return nil }, &ttrpc.UnaryServerInfo{FullMethod: "/x/y"},
		func(context.Context, func(any) error) (any, error) { return 42, want })
	if got != 42 || err != want {
		t.Fatalf("interceptor returned %v, %v; want the method's 42, %v", got, err, want)
	}
	select {
	case <-warmStart.called:
	default:
		t.Fatal("the interceptor did not mark the first call")
	}
}
