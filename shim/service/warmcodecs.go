package service

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// warmCodecs builds the encoders and decoders a task's start and end go
// through, for the task plugin to run beside the shim's start-up. Each
// shim process builds them afresh on first use, by reflection:
// encoding/json's field tables for the runtime spec's forty-odd struct
// types (the spec's first decode, in Create's preflight, took 0.8 ms) and
// protobuf's message tables for the ttrpc envelope, the task API's
// requests and responses and the task events (about 1.4 ms of CPU a
// task, some of it in the first request's decode). Built here while
// containerd connects, on a processor the start-up leaves idle, the first
// use finds them ready: protobuf's are built once (a use meanwhile waits
// for the build under way), encoding/json's at worst twice. Nothing is
// kept but the runtime's own caches. Ordered as the task uses them.
// Measured on the 2-vCPU VMs (15 tasks a side, twice): Create's checks
// (preflight) 1.2 -> 0.5 ms, the admission after them 2.2 -> 2.5 ms (the
// rest of the build beside it), runc started about 0.4 ms sooner.
//
// It yields its processor (runtime.Gosched) after each message and after
// the spec: the shim runs on as many Ps as the node has CPUs (two on these
// VMs), the scheduler takes a P from a running goroutine only after 10 ms,
// and built in one go the warm-up held a P for 1-2 ms while the start-up's
// own goroutines (the ttrpc server's accept, the Create call and its
// mount and observation) waited for one. Between steps whatever else is
// runnable runs first. Scheduling only: a step that never ran leaves its
// codec to its first use. Measured end to end (ctr run --rm, the two
// shims in rotating order in one daemon, 400-500 rounds, four times): 0.2
// to 1.4 ms less a container, every time.
//
// A yield once the ttrpc server is about to serve (warmStart.serving)
// and before its first call waits for that call, up to warmPauseMax:
// the warm-up is then the only work ready on its P, so that P goes
// looking for other work and takes the server's accept loop, which
// otherwise could wait 1-2.5 ms (warmStart). Once the call is in, the
// warm-up goes on beside it.
func warmCodecs() {
	for _, m := range []proto.Message{
		// The Create call as ttrpc decodes it.
		&ttrpc.Request{Metadata: []*ttrpc.KeyValue{{}}},
		&taskAPI.CreateTaskRequest{Rootfs: []*types.Mount{{}}, Options: &anypb.Any{}},
		&runcoptions.Options{},
	} {
		warmProto(m)
		warmStart.yield()
	}
	// The spec's read (preflight) and write (persist), and every nested
	// type with it: the encoder is built for each field's type.
	_, _ = json.Marshal(&specs.Spec{})
	warmStart.yield()
	for _, m := range []proto.Message{
		&ttrpc.Response{},
		&taskAPI.CreateTaskResponse{},
		&taskAPI.StartRequest{}, &taskAPI.StartResponse{},
		&taskAPI.WaitRequest{}, &taskAPI.WaitResponse{ExitedAt: &timestamppb.Timestamp{}},
		&taskAPI.DeleteRequest{}, &taskAPI.DeleteResponse{ExitedAt: &timestamppb.Timestamp{}},
		&taskAPI.ShutdownRequest{},
	} {
		warmProto(m)
		warmStart.yield()
	}
	for _, ev := range []any{
		&eventstypes.TaskCreate{Rootfs: []*types.Mount{{}}, IO: &eventstypes.TaskIO{}},
		&eventstypes.TaskStart{},
		&eventstypes.TaskExit{ExitedAt: &timestamppb.Timestamp{}},
		&eventstypes.TaskDelete{ExitedAt: &timestamppb.Timestamp{}},
	} {
		_, _ = typeurl.MarshalAny(ev)
		warmStart.yield()
	}
	// The records the bind and persist write.
	_, _ = json.Marshal(&record.BundleMark{})
	_, _ = json.Marshal(&spec.Admission{})
}

// warmProto builds m's message tables for both directions.
func warmProto(m proto.Message) {
	if b, err := proto.Marshal(m); err == nil {
		_ = proto.Unmarshal(b, m.ProtoReflect().New().Interface())
	}
}

// warmPauseMax bounds the warm-up's wait for the first call: a shim
// started for a task is sent its Create at once (containerd writes it
// before the server accepts), so the bound only matters to a shim no one
// calls.
const warmPauseMax = time.Millisecond

// warmStart is the shim's start-up as the warm-up sees it: whether the
// ttrpc server is about to serve (RegisterTTRPC, just before pkg/shim
// starts the accept loop) and whether its first call came in (the unary
// interceptor). Package state: one per process, as the warm-up.
//
// Why the warm-up waits: pkg/shim starts the accept loop as a goroutine
// on the P that runs the start-up, queued behind the start-up's other
// goroutines; the inner task service's OOM and console epollers block in
// raw epoll_wait syscalls, each holding its P until the runtime's sysmon
// takes it back, which a few milliseconds into a process's life it does
// only every 1-10 ms. Yielding with runtime.Gosched puts the warm-up on
// the global run queue, which the other P reads before it steals from a
// held P's queue: the warm-up ran on while the accept loop waited (traces
// of 12 shims: 0.65-2.5 ms in 7 of them). Parked instead, the warm-up
// leaves its P idle, and an idle P steals the accept loop (0.01-1.0 ms,
// median 0.3, in 12 traces with the wait).
var warmStart = newStartSignals(warmPauseMax)

// The service is the interceptor pkg/shim chains (shim.run).
var _ shim.TTRPCServerUnaryOptioner = (*service)(nil)

type startSignals struct {
	serving, called         chan struct{}
	servingOnce, calledOnce sync.Once
	pauseMax                time.Duration
}

func newStartSignals(pauseMax time.Duration) *startSignals {
	return &startSignals{serving: make(chan struct{}), called: make(chan struct{}), pauseMax: pauseMax}
}

// serve says the server is about to accept.
func (s *startSignals) serve() { s.servingOnce.Do(func() { close(s.serving) }) }

// call says a call came in.
func (s *startSignals) call() { s.calledOnce.Do(func() { close(s.called) }) }

// yield is the warm-up's yield between steps: it first waits for the
// first call, up to pauseMax, if the server is serving and none came
// in yet.
func (s *startSignals) yield() {
	select {
	case <-s.serving:
		select {
		case <-s.called:
		default:
			t := time.NewTimer(s.pauseMax)
			select {
			case <-s.called:
			case <-t.C:
			}
			t.Stop()
		}
	default:
	}
	runtime.Gosched()
}

// UnaryServerInterceptor marks the shim's first call for the warm-up
// (warmStart); pkg/shim chains it into its ttrpc server. It changes
// nothing in the call.
func (s *service) UnaryServerInterceptor() ttrpc.UnaryServerInterceptor {
	return func(ctx context.Context, u ttrpc.Unmarshaler, _ *ttrpc.UnaryServerInfo, m ttrpc.Method) (any, error) {
		warmStart.call()
		return m(ctx, u)
	}
}
