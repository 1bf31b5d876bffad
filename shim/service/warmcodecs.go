package service

import (
	"encoding/json"
	"runtime"

	eventstypes "github.com/containerd/containerd/api/events"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
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
func warmCodecs() {
	for _, m := range []proto.Message{
		// The Create call as ttrpc decodes it.
		&ttrpc.Request{Metadata: []*ttrpc.KeyValue{{}}},
		&taskAPI.CreateTaskRequest{Rootfs: []*types.Mount{{}}, Options: &anypb.Any{}},
		&runcoptions.Options{},
	} {
		warmProto(m)
		runtime.Gosched()
	}
	// The spec's read (preflight) and write (persist), and every nested
	// type with it: the encoder is built for each field's type.
	_, _ = json.Marshal(&specs.Spec{})
	runtime.Gosched()
	for _, m := range []proto.Message{
		&ttrpc.Response{},
		&taskAPI.CreateTaskResponse{},
		&taskAPI.StartRequest{}, &taskAPI.StartResponse{},
		&taskAPI.WaitRequest{}, &taskAPI.WaitResponse{ExitedAt: &timestamppb.Timestamp{}},
		&taskAPI.DeleteRequest{}, &taskAPI.DeleteResponse{ExitedAt: &timestamppb.Timestamp{}},
		&taskAPI.ShutdownRequest{},
	} {
		warmProto(m)
		runtime.Gosched()
	}
	for _, ev := range []any{
		&eventstypes.TaskCreate{Rootfs: []*types.Mount{{}}, IO: &eventstypes.TaskIO{}},
		&eventstypes.TaskStart{},
		&eventstypes.TaskExit{ExitedAt: &timestamppb.Timestamp{}},
		&eventstypes.TaskDelete{ExitedAt: &timestamppb.Timestamp{}},
	} {
		_, _ = typeurl.MarshalAny(ev)
		runtime.Gosched()
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
