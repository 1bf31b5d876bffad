package main

import (
	"encoding/json"
	"os"

	eventstypes "github.com/containerd/containerd/api/events"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/spec"
)

// warm does, beside the long-lived shim's own start-up, the first-use work
// every fresh shim otherwise pays on its one task's Create and exit path:
// building the JSON codecs of the bundle spec (decoded from the bundle,
// the shim's working directory, as Create will; nothing decoded is kept),
// the events, admission record and manifest; running event redaction once;
// initializing the protobuf types of the task API and its events. While it
// runs, containerd is waiting for the shim: the second core is idle. It
// only fills caches that are safe for concurrent use, so a Create that
// arrives first just does the work itself.
func warm() {
	if dir, err := os.Getwd(); err == nil {
		if s, err := observe.ReadSpec(dir); err == nil {
			json.Marshal(s)
		}
	}
	json.Marshal(&spec.Manifest{})
	json.MarshalIndent(&spec.Admission{}, "", "  ")
	ev := events.Sanitize(spec.Event{Kind: spec.EventCapabilityRemoved, Control: "capabilities", Rule: "CAP_NET_RAW", Detail: "warm"})
	json.Marshal(ev)
	for _, m := range []proto.Message{
		events.ToProto(ev),
		&taskAPI.CreateTaskRequest{Rootfs: []*types.Mount{{}}, Options: &anypb.Any{}}, &taskAPI.CreateTaskResponse{},
		&taskAPI.StartRequest{}, &taskAPI.StartResponse{}, &taskAPI.WaitRequest{}, &taskAPI.WaitResponse{},
		&taskAPI.DeleteRequest{}, &taskAPI.DeleteResponse{}, &taskAPI.StateRequest{}, &taskAPI.StateResponse{},
		&taskAPI.ShutdownRequest{},
		&eventstypes.TaskCreate{}, &eventstypes.TaskStart{}, &eventstypes.TaskExit{}, &eventstypes.TaskDelete{},
	} {
		if b, err := proto.Marshal(m); err == nil {
			proto.Unmarshal(b, m)
		}
		typeurl.MarshalAnyToProto(m)
	}
}

// longLived reports whether this process is the long-lived shim: no
// action (start and delete come last) and no -info or -v. A guess wrong
// either way costs only the warm-up's CPU: warm never writes anything.
func longLived() bool {
	if n := len(os.Args); n > 1 && (os.Args[n-1] == "start" || os.Args[n-1] == "delete") {
		return false
	}
	for _, a := range os.Args[1:] {
		switch a {
		case "-info", "--info", "-v", "--v", "-version", "--version":
			return false
		}
	}
	return true
}
