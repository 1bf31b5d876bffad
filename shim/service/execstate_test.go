package service

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// execInner is the runc task service's Exec: it counts what reached runc.
type execInner struct {
	*fakeInner
	execs []string
}

func (e *execInner) Exec(_ context.Context, r *taskAPI.ExecProcessRequest) (*emptypb.Empty, error) {
	e.execs = append(e.execs, r.ExecID)
	return &emptypb.Empty{}, nil
}

// TestExecOnlyWhileRunning: an exec reaches runc only in a running task;
// before Start (and while starting, and after the exit) it is refused with
// FailedPrecondition, so nothing runs before the deadline, the sensors and
// the gate are armed.
func TestExecOnlyWhileRunning(t *testing.T) {
	f := newFixture(t, 0)
	// An admitted exec is recorded in the operation's directory.
	if dir, err := f.op.store.OperationDir(f.op.id); err != nil || os.MkdirAll(dir, 0o700) != nil {
		t.Fatalf("operation dir %s: %v", dir, err)
	}
	inner := &execInner{fakeInner: f.inner}
	f.s.TTRPCTaskService = inner
	b, _ := json.Marshal(specs.Process{Args: []string{"/bin/true"}, Cwd: "/"})
	exec := func(id string) error {
		_, err := f.s.Exec(context.Background(), &taskAPI.ExecProcessRequest{ID: "c1", ExecID: id, Spec: &anypb.Any{Value: b}})
		return err
	}
	for _, step := range []struct {
		to   opState
		want bool // the exec reaches runc
	}{{opCreated, false}, {opStarting, false}, {opRunning, true}, {opExited, false}} {
		if step.to != opCreated {
			if err := f.op.life.move("test", step.to); err != nil {
				t.Fatal(err)
			}
		}
		err := exec("e-" + step.to.String())
		if step.want {
			if err != nil {
				t.Fatalf("%s: exec refused: %v", step.to, err)
			}
			continue
		}
		if !errors.Is(errgrpc.ToNative(err), errdefs.ErrFailedPrecondition) {
			t.Fatalf("%s: exec: %v, want FailedPrecondition", step.to, err)
		}
	}
	if len(inner.execs) != 1 || inner.execs[0] != "e-running" {
		t.Fatalf("execs that reached runc: %v, want only e-running", inner.execs)
	}
}
