package hooks

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/notify"
	"github.com/gensee/gensee/shim/nsfile"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/telemetry"
	"github.com/gensee/gensee/spec"
)

// MonitorArg, as argv[1] of the hook binary, runs one operation's monitor
// process.
const MonitorArg = "monitor"

// MonitorRequest is what createRuntime hands the monitor process.
type MonitorRequest struct {
	Options
	OperationID string
	PID         int      // the container's init, blocked in runc init
	Status      *os.File // the report to createRuntime: one line, then closed
	Now         func() time.Time
}

// operation is one admitted container as its monitor holds it. The
// lifecycle is bound → exited (init gone, drained) → finished (manifest
// written); every field past mu is guarded by it.
type operation struct {
	req   MonitorRequest
	store record.Store
	adm   *admissionRecord
	log   *log.Entry
	net   *engine.Boundary // nil until bind opened the netns
	pidfd int
	ready time.Time // the table was installed: the container may start from here

	deadline engine.Deadline

	mu       sync.Mutex
	exited   bool         // the init is gone and the cgroup was drained
	drained  drain.Result // what the drain killed; guarded by mu
	finished bool
}

// RunMonitor binds the boundary, reports to createRuntime, and then waits
// for the init's exit (drain), for poststop or, once the init is gone, for
// Grace to pass (finish). It returns when the operation is finished.
func RunMonitor(ctx context.Context, req MonitorRequest) error {
	op := &operation{req: req, store: record.Store{Dir: req.Config.StateDir}, pidfd: -1}
	// The monitor process ends with the operation: its notify commands
	// end first (each bounded by its deadline).
	defer notify.Wait()
	op.log = log.G(ctx).WithField("operation_id", req.OperationID)
	if err := op.bind(ctx); err != nil {
		ms := monitorStatus{Error: err.Error()}
		ms.Refusal, _ = spec.AsRefusal(err)
		op.report(ms)
		op.undo(ctx)
		return err
	}
	ln, err := net.Listen("unix", socketPath(op.store.Dir, req.OperationID))
	if err != nil {
		op.report(monitorStatus{Error: fmt.Sprintf("listen for poststop: %v", err)})
		op.undo(ctx)
		return err
	}
	defer ln.Close()
	op.net.StartSensors(op.adm.Subject)
	op.startDeadline()
	op.ready = time.Now()
	op.report(monitorStatus{Ready: true})
	engine.WarmManifest() // the monitor now waits for the init's exit

	exited := make(chan struct{})
	go func() { op.waitInit(); close(exited) }()
	conns := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	var grace <-chan time.Time
	for {
		select {
		case <-exited:
			op.drain(ctx)
			exited = nil
			grace = time.After(req.grace())
		case c := <-conns:
			op.serve(ctx, c)
			return nil
		case <-grace:
			op.log.WithField("grace", req.grace().String()).Warn("no poststop came after the container exited; finishing the operation")
			op.finish(ctx, false)
			return nil
		}
	}
}

// notifier is the operation's notify command (notify_command), run as the
// monitor process runs: root, as the hook that started it.
func (op *operation) notifier() *notify.Notifier {
	return notify.New(notify.Config{Argv: op.req.Config.NotifyCommand, OperationID: op.adm.OperationID,
		ContainerID: op.adm.ContainerID, Runtime: Runtime, Logger: op.log})
}

func (op *operation) report(ms monitorStatus) {
	if op.req.Status == nil {
		return
	}
	b, _ := json.Marshal(ms)
	op.req.Status.Write(append(b, '\n'))
	op.req.Status.Close()
	op.req.Status = nil
}

// bind identifies the init, opens its netns, records the upperdir's
// baseline, and installs the table there bound to its cgroup, read back,
// with the NFLOG reader already bound.
func (op *operation) bind(ctx context.Context) error {
	var adm admissionRecord
	if err := op.store.ReadJSON(op.req.OperationID, record.AdmissionFile, &adm); err != nil {
		return err
	}
	op.adm = &adm
	op.log = op.log.WithField("container_id", adm.ContainerID)
	pid := op.req.PID
	st, err := cgroup.ReadStat(pid)
	if err != nil {
		return fmt.Errorf("read the init %d: %w", pid, err)
	}
	path, err := cgroup.PathOf(pid)
	if err != nil {
		return err
	}
	id, err := cgroup.ID(path)
	if err != nil {
		return err
	}
	if op.pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		return fmt.Errorf("pidfd of the init %d: %w", pid, err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return fmt.Errorf("open the netns of the init %d: %w", pid, err)
	}
	op.net = engine.NewBoundary(adm.Netns, op.log)
	// The pid is still our init now that the pidfd and the netns are held.
	if again, err := cgroup.ReadStat(pid); err != nil || again.Start != st.Start {
		f.Close()
		return fmt.Errorf("the init %d changed while binding the boundary", pid)
	}
	if err := op.checkNetns(f); err != nil {
		f.Close()
		return err
	}
	op.adm.Subject = &spec.Subject{InitPID: pid, StartTime: st.Start, CgroupPath: path, CgroupID: id}
	// Before the table, while nothing of the image has run: what the
	// upperdir holds now is not the workload's (takeBaseline).
	if err := op.takeBaseline(ctx); err != nil {
		f.Close()
		return err
	}
	me, err := selfOwner()
	if err != nil {
		f.Close()
		return err
	}
	op.adm.Monitor = &me
	// Only a netns runc made for this container alone fails closed; a
	// joined one (podman's CNI netns may be a pod's) or the host's keeps
	// the cgroup scope, where an escape is detected, never reported as
	// enforced (engine.Boundary.Bind).
	if _, err := op.net.Bind(ctx, engine.BindSpec{
		OperationID: adm.OperationID, Network: adm.Contract.Network, Netns: f, LogGroup: op.req.Config.LogGroup,
		Cgroup: netpolicy.CgroupRef{ID: id, Level: cgroup.Level(path), Path: path},
		Monitor: telemetry.Config{OperationID: adm.OperationID, Store: op.store, Ctx: ctx,
			Logger: op.log, Notify: op.notifier().Finding},
		Mark: func(table string) error {
			op.adm.Table = table
			return writeMarker(op.store.Dir, marker{OperationID: adm.OperationID, ContainerID: adm.ContainerID, Table: table,
				Netns: adm.Netns, NetnsPath: adm.NetnsPath, Cgroup: path, CgroupID: id, Monitor: me})
		},
	}); err != nil {
		return err
	}
	return op.store.WriteJSON(adm.OperationID, record.AdmissionFile, op.adm)
}

// checkNetns: the init is in the netns admission checked (a joined path
// re-checked by identity, the host's by identity), owned by the host's
// user namespace, whose root alone can change the table.
func (op *operation) checkNetns(f *os.File) error {
	got, err := nsfile.IDOf(f)
	if err != nil {
		return err
	}
	switch op.adm.Netns {
	case netnsPath:
		if op.adm.NetnsID == nil || got != *op.adm.NetnsID {
			return fmt.Errorf("the init joined another network namespace than the one admitted (%s)", op.adm.NetnsPath)
		}
	case netnsHost:
		if host, err := nsfile.IDOfPath("/proc/self/ns/net"); err != nil || got != host {
			return fmt.Errorf("the spec has no network namespace, but the init is not in the host's")
		}
	}
	ok, err := nsfile.OwnedByInitialUserns(f)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the init's network namespace is owned by a user namespace other than the host's, whose root could delete the table")
	}
	return nil
}

// undo removes what a failed bind took: the table, the monitor, the
// netns, the marker.
func (op *operation) undo(ctx context.Context) {
	removed := true
	if op.net != nil {
		removed = op.net.Close(ctx) != ""
	}
	closeFD(op.pidfd)
	if removed {
		removeMarker(op.store.Dir, op.req.OperationID)
	}
}

// waitInit returns when the init has exited (its pidfd is readable).
func (op *operation) waitInit() {
	for {
		fds := []unix.PollFd{{Fd: int32(op.pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n > 0 {
			return
		}
	}
}

// drain is the kill step at the init's exit, as every door's
// (drain.All): the cgroup's remaining processes (podman exec'd ones
// included) and every escaped process the binding sensor knows. It runs
// once, when the init exits (or at finish, if that comes first); the exit
// path's Drain step reads what it did.
func (op *operation) drain(ctx context.Context) drain.Result {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.exited {
		return op.drained
	}
	op.exited = true
	op.deadline.Stop()
	k := drain.All(ctx, op.adm.Subject.CgroupPath, op.net.DrainSteps())
	if k.Err != nil && errors.Is(k.Err, fs.ErrNotExist) {
		// The engine's runtime removes the cgroup once it is empty; a
		// missing one has nothing left to drain.
		k.Err = nil
	}
	op.drained = k
	return k
}

// startDeadline kills the container's cgroup when the contract's deadline
// passes.
func (op *operation) startDeadline() {
	engine.ArmDeadline(&op.deadline, op.adm.Contract, op.net, "container", func() error {
		_, err := cgroup.Drain(context.Background(), op.adm.Subject.CgroupPath)
		return err
	}, op.log)
}

// poststopReply is the monitor's answer to poststop.
type poststopReply struct {
	OperationID string `json:"operation_id"`
	Verdict     string `json:"verdict"`
	Error       string `json:"error,omitempty"`
}

// serve answers one poststop: finish, then say how it went.
func (op *operation) serve(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	bufio.NewReader(c).ReadString('\n')
	m, err := op.finish(ctx, true)
	r := poststopReply{OperationID: op.req.OperationID}
	if m != nil {
		r.Verdict = m.Gate.Verdict
	}
	if err != nil {
		r.Error = err.Error()
	}
	b, _ := json.Marshal(r)
	c.Write(append(b, '\n'))
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
