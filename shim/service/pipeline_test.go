package service

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/log"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/engine/enginetest"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// fakeInner is the runc task service: the init exits when exit is closed
// (with status), an exec's Wait answers at once.
type fakeInner struct {
	taskAPI.TTRPCTaskService
	c        *enginetest.Calls
	exit     chan struct{}
	status   uint32
	startErr error
	onStart  func() // what the inner service does while starting
	onDelete func() // what the inner service does while deleting
	// deleteErr, when set, is the inner Delete's answer (nothing deleted).
	deleteErr error
	pub       *holdingPublisher
	deleted   atomic.Bool
}

func (f *fakeInner) Start(_ context.Context, r *taskAPI.StartRequest) (*taskAPI.StartResponse, error) {
	f.c.Add("inner.start " + r.ExecID)
	if f.onStart != nil {
		f.onStart()
	}
	if f.startErr != nil {
		return nil, f.startErr
	}
	return &taskAPI.StartResponse{Pid: 42}, nil
}

func (f *fakeInner) Wait(ctx context.Context, r *taskAPI.WaitRequest) (*taskAPI.WaitResponse, error) {
	if r.ExecID != "" {
		return &taskAPI.WaitResponse{ExitStatus: 7}, nil
	}
	if f.deleted.Load() { // as runc's shim answers for a deleted task
		return nil, errgrpc.ToGRPCf(errdefs.ErrNotFound, "container %s not found", r.ID)
	}
	f.c.Add("inner.wait")
	select {
	case <-f.exit:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &taskAPI.WaitResponse{ExitStatus: f.status}, nil
}

func (f *fakeInner) Delete(_ context.Context, r *taskAPI.DeleteRequest) (*taskAPI.DeleteResponse, error) {
	f.c.Add("inner.delete " + r.ExecID)
	if f.onDelete != nil {
		f.onDelete()
	}
	if f.deleteErr != nil {
		return nil, f.deleteErr
	}
	f.deleted.Store(true)
	return &taskAPI.DeleteResponse{ExitStatus: f.status}, nil
}

func (f *fakeInner) Kill(_ context.Context, r *taskAPI.KillRequest) (*emptypb.Empty, error) {
	f.c.Add("inner.kill")
	close(f.exit)
	// The init's exit, forwarded as runc's shim does.
	f.pub.Publish(context.Background(), "/tasks/exit", &eventstypes.TaskExit{ContainerID: r.ID, ID: r.ID, ExitStatus: 137})
	return &emptypb.Empty{}, nil
}

// fakePublisher is containerd's publisher: it records what went out.
type fakePublisher struct{ c *enginetest.Calls }

func (p fakePublisher) Publish(_ context.Context, topic string, ev events.Event) error {
	if e, ok := ev.(*eventstypes.TaskExit); ok {
		p.c.Add(fmt.Sprintf("publish exit %s %d", e.ID, e.ExitStatus))
		return nil
	}
	p.c.Add("publish " + topic)
	return nil
}
func (fakePublisher) Close() error { return nil }

// fixture is a service with one created operation whose exit pipeline and
// inner service are fakes.
type fixture struct {
	c     *enginetest.Calls
	s     *service
	inner *fakeInner
	op    *operation
	gate  *enginetest.Gate
	store *enginetest.Store
}

func newFixture(t *testing.T, gateFailedStatus uint32) *fixture {
	t.Helper()
	c := enginetest.NewCalls()
	inner := &fakeInner{c: c, exit: make(chan struct{})}
	ctx := context.Background()
	s := newService(ctx, inner, newHoldingPublisher(fakePublisher{c}))
	inner.pub = s.pub
	s.loadConfig = func(string) (config.Config, error) { return config.Config{}, errors.New("not in this test") }
	dir := t.TempDir()
	op := &operation{id: "0123456789abcdef0123456789abcdef", namespace: "test", containerID: "c1", bundle: dir,
		store: record.Store{Dir: dir}, admission: &spec.Admission{}, done: make(chan struct{}), innerExited: make(chan struct{}), ctx: ctx,
		contract: spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}}}
	op.net = engine.NewBoundary(spec.NetnsPrivate, log.L)
	f := &fixture{c: c, s: s, inner: inner, op: op, gate: &enginetest.Gate{C: c, Out: engine.GateOutcome{Ran: true}}, store: &enginetest.Store{C: c}}
	op.exit = &engine.Finish{Gate: f.gate, Drain: enginetest.Drain{C: c}, Network: enginetest.Network{C: c}, Store: f.store,
		Release: &opRelease{op: op}, Manifest: op.manifest, GateFailedStatus: gateFailedStatus, Log: log.L}
	s.put(op)
	return f
}

// Start arms the hold before the inner Start: an init that exits at once
// (its TaskExit forwarded while Start is still in flight) is held until the
// manifest is written; Wait and Delete answer only after it, Delete only
// after the held TaskExit went out, and with the operator's status for a
// failed gate everywhere.
func TestStartWaitDeleteHoldTaskExit(t *testing.T) {
	f := newFixture(t, 86)
	f.gate.Out = engine.GateOutcome{Ran: true, Err: errors.New("gate failed")}
	ctx := context.Background()
	release := make(chan struct{})
	f.inner.onStart = func() {
		go func() {
			<-release
			f.c.Add("exited")
			exitInit(f, 0)
		}()
	}
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan *taskAPI.WaitResponse, 1)
	go func() {
		r, err := f.s.Wait(ctx, &taskAPI.WaitRequest{ID: "c1"})
		if err != nil {
			t.Error(err)
		}
		f.c.Add("waited")
		waited <- r
	}()
	f.c.WaitN(t, "inner.wait", 2) // the exit watcher's and the client's
	close(release)
	dr, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	f.c.Wait(t, "waited")
	c := f.c
	c.Before(t, "inner.start ", "exited")
	c.Before(t, "exited", "drain")
	c.Before(t, "store.manifest "+spec.VerdictFail, "publish exit c1 86")
	c.Before(t, "store.manifest "+spec.VerdictFail, "waited")
	c.Before(t, "publish exit c1 86", "inner.delete ")
	if r := <-waited; r == nil || r.ExitStatus != 86 || dr.ExitStatus != 86 {
		t.Fatalf("wait %v, delete status %d, want the gate-failed status 86", r, dr.ExitStatus)
	}
	if slices.Contains(c.Get(), "publish exit c1 0") {
		t.Fatal("the init's own status went out")
	}
	if f.op.life.current() != opDeleted || f.s.get("c1") != nil {
		t.Fatalf("state %s after delete", f.op.life.current())
	}
}

// An init that exits at once, its TaskExit forwarded while Start is still
// in flight: held until the manifest is written.
func TestInstantExitHeld(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	f.inner.onStart = func() {
		f.c.Add("exited")
		exitInit(f, 5)
	}
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.c.Before(t, "exited", "drain")
	f.c.Before(t, "store.manifest "+spec.VerdictPass, "publish exit c1 5")
	f.c.Before(t, "publish exit c1 5", "inner.delete ")
}

// An exec's exit is never held, even while the init's is.
func TestExecExitNotHeld(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.s.pub.Publish(ctx, "/tasks/exit", &eventstypes.TaskExit{ContainerID: "c1", ID: "exec1", ExitStatus: 7})
	f.c.Wait(t, "publish exit exec1 7")
	if r, err := f.s.Wait(ctx, &taskAPI.WaitRequest{ID: "c1", ExecID: "exec1"}); err != nil || r.ExitStatus != 7 {
		t.Fatalf("exec wait: %v %v", r, err)
	}
	if slices.Contains(f.c.Get(), "drain") {
		t.Fatal("an exec's exit ran the exit pipeline")
	}
	f.s.Kill(ctx, &taskAPI.KillRequest{ID: "c1"})
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.c.Before(t, "publish exit exec1 7", "drain")
	f.c.Before(t, "store.manifest "+spec.VerdictPass, "publish exit c1 137")
}

// A task deleted before it started: Wait answers at once, Delete finalizes
// the network and writes a manifest that says the gate did not run, and
// neither the drain nor the gate ran.
func TestCreatedNeverStarted(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	waited := make(chan error, 1)
	go func() {
		_, err := f.s.Wait(ctx, &taskAPI.WaitRequest{ID: "c1"})
		waited <- err
	}()
	f.c.Wait(t, "inner.wait")
	f.inner.onDelete = func() { close(f.inner.exit) } // runc delete ends the blocked init
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited: // NotFound or an answer: it returned
	case <-time.After(10 * time.Second):
		t.Fatal("Wait of a never-started task hangs across its Delete")
	}
	got := slices.DeleteFunc(f.c.Get(), func(s string) bool { return s == "inner.wait" })
	// inner.delete, then the sensors' stop beside the counters' read,
	// then the rest in order, then the last two side by side.
	first := []string{"inner.delete "}
	beside := []string{"net.stopSensors", "net.counters"}
	want := []string{"net.finish 2 true", "net.remove"}
	last := []string{"net.closeMonitor", "store.manifest " + spec.VerdictNotRun}
	n := len(first) + len(beside) + len(want)
	if len(got) != n+len(last) || !slices.Equal(got[:1], first) || !enginetest.SameSet(got[1:3], beside) ||
		!slices.Equal(got[3:n], want) || !enginetest.SameSet(got[n:], last) {
		t.Fatalf("calls\n got %v\nwant %v, %v in any order, %v, then %v in any order", got, first, beside, want, last)
	}
	if f.op.life.current() != opDeleted {
		t.Fatalf("state %s", f.op.life.current())
	}
}

// A second Start, a Start after a failed one, and a Delete in mid-start
// (it waits for the Start to settle, bounded by its caller).
func TestStartStates(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	f.inner.startErr = errors.New("runc start failed")
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err == nil {
		t.Fatal("inner failure not returned")
	}
	if st := f.op.life.current(); st != opCreated {
		t.Fatalf("after a failed start: %s, want created", st)
	}
	f.inner.startErr = nil
	block := make(chan struct{})
	started := make(chan struct{})
	f.inner.onStart = func() { close(started); <-block }
	go f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"})
	<-started
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := f.s.Delete(short, &taskAPI.DeleteRequest{ID: "c1"}); err == nil || slices.Contains(f.c.Get(), "inner.delete ") {
		t.Fatalf("delete while starting: %v; calls %v", err, f.c.Get())
	}
	close(block)
	f.c.Wait(t, "inner.start ")
	for f.op.life.current() != opRunning {
		time.Sleep(time.Millisecond)
	}
	_, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"})
	if !errdefs.IsFailedPrecondition(errgrpc.ToNative(err)) || !strings.HasSuffix(err.Error(), "gensee: task c1: cannot start a task in running state: failed precondition") {
		t.Fatalf("second start: %v", err)
	}
	f.s.Kill(ctx, &taskAPI.KillRequest{ID: "c1"})
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
}

// The init dies during the inner Start: the inner service answers Wait
// and forwards the TaskExit before Start fails. Neither Wait nor the
// TaskExit may wait for an exit pipeline that will never run, and a Delete
// after it finalizes the task as never started.
func TestFailedStartReleasesWaitAndExit(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	waiting := make(chan struct{})
	f.inner.onStart = func() {
		close(waiting)
		f.c.WaitN(t, "inner.wait", 1) // the client's Wait is in flight
		exitInit(f, 1)
	}
	f.inner.startErr = errors.New("runc start: init died")
	waited := make(chan error, 1)
	go func() {
		<-waiting
		_, err := f.s.Wait(ctx, &taskAPI.WaitRequest{ID: "c1"})
		waited <- err
	}()
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err == nil {
		t.Fatal("inner failure not returned")
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait hangs after a failed Start")
	}
	f.c.Wait(t, "publish exit c1 1")
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if f.store.M == nil || f.store.M.Gate.Verdict != spec.VerdictNotRun || slices.Contains(f.c.Get(), "drain") {
		t.Fatalf("after a failed start: manifest %v, calls %v", f.store.M, f.c.Get())
	}
}

// Delete claims a created task before the inner Delete: a Start that
// comes meanwhile is refused, and only one manifest is written.
func TestDeleteClaimsCreated(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	close(f.inner.exit)
	var startErr error
	f.inner.onDelete = func() {
		_, startErr = f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"})
	}
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if !errdefs.IsFailedPrecondition(errgrpc.ToNative(startErr)) || !strings.Contains(startErr.Error(), "cannot start a task in deleting state") {
		t.Fatalf("start during delete: %v", startErr)
	}
	if slices.Contains(f.c.Get(), "inner.start ") {
		t.Fatal("the inner Start ran during the delete")
	}
}

// Delete gives up (retryably) when its caller does while the exit path
// still runs, and the retried Delete completes once it is done.
func TestDeleteWhileFinalizing(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	hang := make(chan struct{})
	f.op.exit.Gate = blockingGate{c: f.c, until: hang}
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.s.Kill(ctx, &taskAPI.KillRequest{ID: "c1"})
	f.c.Wait(t, "gate.run")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := f.s.Delete(short, &taskAPI.DeleteRequest{ID: "c1"})
	if !errdefs.IsUnavailable(errgrpc.ToNative(err)) {
		t.Fatalf("delete while finalizing: %v, want Unavailable", err)
	}
	if slices.Contains(f.c.Get(), "inner.delete ") {
		t.Fatal("inner delete ran before the exit path finished")
	}
	close(hang)
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.c.Before(t, "store.manifest "+spec.VerdictPass, "inner.delete ")
}

type blockingGate struct {
	c     *enginetest.Calls
	until chan struct{}
}

func (g blockingGate) Prepare(context.Context, time.Time) {}
func (g blockingGate) Run(context.Context, time.Time) engine.GateOutcome {
	g.c.Add("gate.run")
	<-g.until
	return engine.GateOutcome{Ran: true}
}

// A hung gate helper costs the gate's time limit and a failed verdict: the
// pipeline goes on, releases, and Delete does not hang.
func TestGateHelperTimeoutReleases(t *testing.T) {
	reapChildren(t)
	orig := gateHelperCommand
	gateHelperCommand = hangingHelper
	defer func() { gateHelperCommand = orig }()
	f := newFixture(t, 0)
	f.op.diff = diffSource{Upper: t.TempDir()}
	f.op.contract.Products = []spec.Product{{Slot: "out/result.json", Class: spec.ClassStructuredResult}}
	f.op.cfg.GateTimeout = config.Duration{Duration: 300 * time.Millisecond}
	f.op.exit.GateLimit = exitPipelineFor(f.op).GateLimit // production's wiring
	f.op.exit.Gate = &helperGate{op: f.op}
	ctx := context.Background()
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.s.Kill(ctx, &taskAPI.KillRequest{ID: "c1"})
	start := time.Now()
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("delete took %s", d)
	}
	m := f.store.M
	if m == nil || m.Gate.Verdict != spec.VerdictFail || len(m.Gate.Violations) != 1 || m.Gate.Violations[0].Rule != "gate_error" ||
		!strings.Contains(m.Gate.Violations[0].Detail, "limit 300ms (gate_timeout)") {
		t.Fatalf("manifest gate %+v, want a failed verdict naming the configured limit and its setting", m.Gate)
	}
}

// hangingHelper is a gate helper that never answers.
func hangingHelper() (*exec.Cmd, func(), error) {
	return exec.Command("/bin/sleep", "30"), func() {}, nil
}

// The holding publisher never blocks the inner service's forwarding
// goroutine: a held TaskExit returns at once, later events (another
// container's exit, a TaskDelete) go out ahead of it, and it goes out, with
// the override, once done is closed.
func TestHoldingPublisherNeverBlocks(t *testing.T) {
	c := enginetest.NewCalls()
	p := newHoldingPublisher(fakePublisher{c})
	ctx := context.Background()
	done := make(chan struct{})
	h := p.arm("c1", done)
	returned := make(chan struct{})
	go func() {
		p.Publish(ctx, "/tasks/exit", &eventstypes.TaskExit{ContainerID: "c1", ID: "c1", ExitStatus: 1})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish of a held exit blocked")
	}
	p.Publish(ctx, "/tasks/exit", &eventstypes.TaskExit{ContainerID: "c2", ID: "c2", ExitStatus: 2})
	p.Publish(ctx, "/tasks/delete", &eventstypes.TaskDelete{ContainerID: "c2"})
	code := uint32(86)
	h.override = &code
	close(done)
	h.waitPublished(ctx)
	want := []string{"publish exit c2 2", "publish /tasks/delete", "publish exit c1 86"}
	if got := c.Get(); !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	// Disarmed: the next exit of c1 is not held.
	p.arm("c1", make(chan struct{}))
	p.disarm("c1")
	p.Publish(ctx, "/tasks/exit", &eventstypes.TaskExit{ContainerID: "c1", ID: "c1", ExitStatus: 3})
	if got := c.Get(); got[len(got)-1] != "publish exit c1 3" {
		t.Fatalf("disarmed exit not published at once: %v", got)
	}
}

// Start waits for the admission record bind wrote off Create's path, and
// refuses (nothing started) when it failed.
func TestStartWaitsForAdmissionRecord(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	f.op.recorded = func() error { f.c.Add("recorded"); return errors.New("no space left on device") }
	_, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"})
	if !errdefs.IsUnavailable(errgrpc.ToNative(err)) || !strings.Contains(err.Error(), "admission record was not written") {
		t.Fatalf("start: %v", err)
	}
	if slices.Contains(f.c.Get(), "inner.start ") || f.op.life.current() != opCreated {
		t.Fatalf("the init started without its record: %v, state %s", f.c.Get(), f.op.life.current())
	}
	f.op.recorded = func() error { f.c.Add("recorded"); return nil }
	if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.c.Before(t, "recorded", "inner.start ")
	f.s.Kill(ctx, &taskAPI.KillRequest{ID: "c1"})
	if _, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
}

// Delete claims in one step: a Delete that found the task created, and a
// Start and an instant exit that come before its claim, leave it waiting for
// the exit pipeline, never deleting under it or writing a second manifest.
func TestDeleteClaimWaitsForPipeline(t *testing.T) {
	f := newFixture(t, 86)
	f.gate.Out = engine.GateOutcome{Ran: true, Err: errors.New("gate failed")}
	ctx := context.Background()
	hang := make(chan struct{})
	f.op.exit.Gate = blockingGate{c: f.c, until: hang}
	f.inner.onStart = func() {
		exitInit(f, 0)
	}
	// The Start lands while Delete waits for the admission record.
	var first atomic.Bool
	f.op.recorded = func() error {
		if first.CompareAndSwap(false, true) {
			if _, err := f.s.Start(ctx, &taskAPI.StartRequest{ID: "c1"}); err != nil {
				t.Error(err)
			}
			f.c.Wait(t, "gate.run")
			go func() { time.Sleep(50 * time.Millisecond); close(hang) }()
		}
		return nil
	}
	dr, err := f.s.Delete(ctx, &taskAPI.DeleteRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	f.c.Before(t, "store.manifest "+spec.VerdictPass, "inner.delete ")
	f.c.Before(t, "publish exit c1 0", "inner.delete ")
	n := 0
	for _, c := range f.c.Get() {
		if strings.HasPrefix(c, "store.manifest") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d manifests written: %v", n, f.c.Get())
	}
	_ = dr
}

// An exec may not take the container's id: its exit would pass for the
// init's.
func TestExecIDOfContainerRefused(t *testing.T) {
	f := newFixture(t, 0)
	_, err := f.s.Exec(context.Background(), &taskAPI.ExecProcessRequest{ID: "c1", ExecID: "c1"})
	if !errdefs.IsInvalidArgument(errgrpc.ToNative(err)) || !strings.Contains(err.Error(), "exec id \"c1\" is the container's id") {
		t.Fatalf("exec with the container's id: %v", err)
	}
}

// The pipeline starts on the init's exit as its pidfd tells it and takes
// the status from the pidfd, without waiting for the inner service: the
// release may come first. Delete still waits for the inner Wait's answer.
func TestExitPipelineStartsOnPidfd(t *testing.T) {
	f := newFixture(t, 0)
	f.inner.status = 9 // what the inner Wait would say; the pidfd's 5 is the manifest's
	for _, st := range []opState{opStarting, opRunning} {
		if err := f.op.life.move("start", st); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", "read x; exit 5")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	st, err := cgroup.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	go f.s.watchExit(f.op, cgroup.WatchExit(cgroup.Proc{PID: cmd.Process.Pid, Start: st.Start}))
	f.c.Wait(t, "inner.wait")
	in.Close() // the "init" exits 5
	select {
	case <-f.op.done:
	case <-time.After(10 * time.Second):
		t.Fatal("not released after the init's exit")
	}
	if m := f.store.M; m == nil || m.ExitStatus != 5 {
		t.Fatalf("manifest %+v, want the pidfd's status 5", m)
	}
	if f.op.life.current() != opExited {
		t.Fatalf("state %s, want exited", f.op.life.current())
	}
	f.c.Before(t, "gate.run", "store.manifest "+spec.VerdictPass)
	select {
	case <-f.op.innerExited:
		t.Fatal("inner exit seen before the inner Wait answered")
	default:
	}
	deleted := make(chan error, 1)
	go func() {
		_, err := f.s.Delete(context.Background(), &taskAPI.DeleteRequest{ID: "c1"})
		deleted <- err
	}()
	select {
	case err := <-deleted:
		t.Fatalf("Delete before the inner Wait answered: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(f.inner.exit)
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Delete hangs after the inner Wait answered")
	}
}
