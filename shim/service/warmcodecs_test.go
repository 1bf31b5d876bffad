package service

import (
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"

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
