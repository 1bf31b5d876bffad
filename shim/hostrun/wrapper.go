package hostrun

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/hostrun/inner"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// wrapper is the started wrapper process, its control pipe (the spec,
// then the go), its status pipe (its reports and the stage's) and the
// relayed stdio.
type wrapper struct {
	c      *exec.Cmd
	ctl    *os.File
	stR    *os.File
	status *bufio.Reader
	stdio  *stdio
}

// close releases the parent's ends once the wrapper is gone.
func (w *wrapper) close() {
	w.ctl.Close()
	w.stR.Close()
	w.stdio.Close()
}

// kill ends a wrapper that will not run the command.
func (w *wrapper) kill() {
	w.c.Process.Kill()
	w.c.Wait()
}

// runWrapper waits for the wrapper to be ready (handOver), lets it exec,
// waits for the command and runs the exit path.
func (r *run) runWrapper(ctx context.Context, h *held, w *wrapper, readied <-chan readyResult) (*Result, error) {
	defer w.close()
	// The wrapper is the run's first process: the sensors follow it from
	// now on, their first checks beside its building of the view rather
	// than beside the go. The admission, with its table and subject, is
	// already durable (execute: beside the table's install).
	h.net.StartSensors(r.adm.Subject)
	rd := <-readied
	ready, rf := rd.status, rd.rf
	if rf != nil {
		w.kill()
		h.net.StopSensors()
		return nil, r.abandon(ctx, h, rf)
	}
	r.phases.mark("wrapper_ready")
	started := time.Now()
	var dl engine.Deadline
	engine.ArmDeadline(&dl, r.contract, h.net, "command", h.cg.kill, r.log)
	stopSignals := r.forwardSignals(w.c.Process, h)
	if _, err := w.ctl.Write([]byte{'g'}); err != nil {
		r.log.WithError(err).Warn("send go to the wrapper")
	}
	w.ctl.Close()
	// While the command runs, this process only waits.
	engine.WarmManifest()
	// The stage's applied line: the command runs. A failure line, or EOF
	// without the applied line: nothing of the command ran.
	applied, lingering, failed := readExec(w.status, r.phases, w.stdio.relayInput)
	if err := w.c.Wait(); err != nil && w.c.ProcessState == nil {
		r.log.WithError(err).Error("wait for the command")
	}
	r.phases.mark("wrapper_exit")
	stopSignals()
	hit := dl.Stop()
	if failed != nil {
		h.net.StopSensors()
		return nil, r.abandon(ctx, h, wrapperRefusal(*failed, nil))
	}
	return r.exit(ctx, h, hostExit{status: exitStatus(w.c.ProcessState), started: started, deadline: hit,
		sandbox: sandboxOf(ready, applied, w.stdio), stdio: w.stdio, lingering: lingering,
		writables: writables(r.cmd.Workspace, ready.Tmpfs, ready.Volatile)})
}

// startWrapper starts the wrapper in the run's cgroup: a new mount, pid,
// ipc and uts namespace and a new session (no controlling terminal), born
// in the cgroup (the table is installed meanwhile: the wrapper waits for
// its spec, and the command for the go); the wrapper adds the cgroup
// namespace, the stage the user namespace.
func (r *run) startWrapper(h *held, exe *sealedCommand) (*wrapper, *Refusal, error) {
	self, done, err := sandboxPath(r.req.Self)
	if err != nil {
		return nil, refuse(ReasonWrapper, SandboxBinary, "", "%v", err), nil
	}
	defer done()
	stdio, err := newStdio(r.req.Stdin, r.req.Stdout, r.req.Stderr)
	if err != nil {
		return nil, refuse(ReasonWrapper, "stdio", "", "%v", err), nil
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		stdio.Close()
		return nil, nil, err
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		stdio.Close()
		ctlR.Close()
		ctlW.Close()
		return nil, nil, err
	}
	extra := []*os.File{ctlR, stW, exe.Exe.File}
	if exe.Interp != nil {
		extra = append(extra, exe.Interp.File)
	}
	w := &wrapper{ctl: ctlW, stR: stR, status: bufio.NewReader(stR), stdio: stdio,
		c: &exec.Cmd{Path: self, Args: []string{"gensee", inner.WrapperArg}, Env: []string{},
			Stdin: stdio.in, Stdout: stdio.out, Stderr: stdio.err, ExtraFiles: extra,
			SysProcAttr: &syscall.SysProcAttr{
				Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
				Setsid:     true, UseCgroupFD: true, CgroupFD: int(h.cgFD.Fd()),
			}}}
	err = w.c.Start()
	ctlR.Close()
	stW.Close()
	stdio.started()
	if err != nil {
		w.close()
		return nil, refuse(ReasonWrapper, "wrapper", "", "start the wrapper in cgroup %s: %v", h.cg.Path, err), nil
	}
	return w, nil, nil
}

// subject makes the started wrapper the run's subject: its pid, start
// time and cgroup.
func (r *run) subject(w *wrapper, h *held) *Refusal {
	pid := w.c.Process.Pid
	pst, err := cgroup.ReadStat(pid)
	if err != nil {
		return refuse(ReasonWrapper, "wrapper", "", "read the wrapper's start time: %v", err)
	}
	r.adm.Subject = &spec.Subject{InitPID: pid, StartTime: pst.Start, CgroupPath: h.cg.Path, CgroupID: h.cg.ID}
	return nil
}

// readyResult is the wrapper's first report.
type readyResult struct {
	status inner.Status
	rf     *Refusal
}

// handOver hands the wrapper its spec once recorded says the record is in
// place, and reads its ready report, in the background: the wrapper
// builds the command's view meanwhile. Without the record the wrapper
// gets nothing (the caller kills it).
func (r *run) handOver(w *wrapper, exe *sealedCommand, upper, work string, recorded func() bool) <-chan readyResult {
	out := make(chan readyResult, 1)
	go func() {
		if !recorded() {
			out <- readyResult{}
			return
		}
		st, rf := r.readyWrapper(w, exe, upper, work)
		out <- readyResult{st, rf}
	}()
	return out
}

// stagedOverlayOptions are the staged workspace's overlay options: the
// gate's hardening, and volatile (a kernel before 5.10 refuses it: the
// wrapper then mounts without it, and says so). The upper dir is scratch
// the overlay is mounted on once: the gate reads it through the page
// cache once the mount is gone and makes durable only what it staged
// (gate.SyncStaged); nothing mounts an upper dir twice, so a run a crash
// interrupts leaves a record without a manifest, and no gate read its
// upper dir, which may have lost writes. Without volatile, the unmount as
// the run's mount namespace ends syncs the whole file system under the
// state dir, on the exit's path: ~3 ms with nothing to write, more when
// the host has dirty data. The command's fsync, fdatasync and syncfs on
// the staged workspace then make nothing durable; the manifest says so
// (writables).
func stagedOverlayOptions() []string {
	return append(gate.HardenOverlayOptions(nil), inner.OverlayVolatile)
}

// readyWrapper hands the wrapper its spec and reads that it is ready.
func (r *run) readyWrapper(w *wrapper, exe *sealedCommand, upper, work string) (inner.Status, *Refusal) {
	ws := inner.Spec{Workspace: r.cmd.Workspace, WorkspaceDev: r.ws.ID.Dev, WorkspaceIno: r.ws.ID.Ino, Upper: upper, Work: work,
		UID: r.cmd.User.UID, GID: r.cmd.User.GID, Args: r.cmd.Args, Env: r.cmd.Env, InterpArgs: exe.InterpArgs,
		RuntimeFiles: r.req.Config.AllowedRuntimeFiles, OverlayOptions: stagedOverlayOptions()}
	if mnt, err := os.Readlink("/proc/self/ns/mnt"); err == nil {
		ws.HostMountNS = mnt
	}
	ready, err := handshake(w.ctl, w.status, ws)
	if err != nil || !ready.Ready {
		return ready, wrapperRefusal(ready, err)
	}
	return ready, nil
}

// prepareAdmission writes the admission, with its subject and the table
// the operation's id names, into the record under a temporary name, in the
// background (unless write is false: nothing to record): the write and its
// fsync run beside the table's install, and only the rename is left
// (admitted). admission.json names a table only once it was installed
// and read back: a gensee killed before that leaves no admission.json.
func (r *run) prepareAdmission(write bool) <-chan pendingAdmission {
	done := make(chan pendingAdmission, 1)
	if !write {
		done <- pendingAdmission{}
		return done
	}
	r.adm.Table = netpolicy.TableName(r.id)
	adm := *r.adm
	go func() {
		p, err := r.store.PrepareJSON(r.id, record.AdmissionFile, &adm)
		done <- pendingAdmission{p, err}
	}()
	return done
}

// pendingAdmission is the admission prepared (prepareAdmission), not yet
// in place.
type pendingAdmission struct {
	p   *fsafe.Pending
	err error
}

// admitted puts the prepared admission in place once the table is
// installed and read back (bound), else drops it; the error is the
// write's.
func (pa pendingAdmission) admitted(bound bool) error {
	switch {
	case pa.err != nil:
		return pa.err
	case pa.p == nil:
		return nil
	case !bound:
		pa.p.Abort()
		return nil
	}
	return pa.p.Commit()
}

// readExec reads the status fd after the go until the wrapper exits: the
// stage's applied line (execed is called then: the command is being
// executed), then (unless the cgroup was killed) the wrapper's lingering
// count; or a failure line, when nothing of the command ran.
func readExec(status *bufio.Reader, ph *phases, execed func()) (*inner.Applied, int, *inner.Status) {
	var applied *inner.Applied
	lingering := 0
	for {
		line, err := status.ReadBytes('\n')
		if len(line) > 0 {
			var st inner.Status
			if jerr := json.Unmarshal(line, &st); jerr != nil {
				return nil, 0, &inner.Status{Step: "exec", Error: "decode the stage's report: " + jerr.Error()}
			}
			switch {
			case st.Error != "":
				return nil, 0, &st
			case st.Applied != nil:
				applied = st.Applied
				ph.mark("stage")
				execed()
			case st.Lingering != nil:
				lingering = *st.Lingering
			}
		}
		if err != nil {
			if applied == nil {
				return nil, 0, &inner.Status{Step: "exec", Error: "the wrapper exited before the command's exec"}
			}
			return applied, lingering, nil
		}
	}
}

// handshake hands the wrapper its spec and reads its first report.
func handshake(ctl *os.File, status *bufio.Reader, ws inner.Spec) (inner.Status, error) {
	if err := json.NewEncoder(ctl).Encode(ws); err != nil {
		return inner.Status{}, fmt.Errorf("hand the wrapper its spec: %w", err)
	}
	line, err := status.ReadBytes('\n')
	if err != nil {
		return inner.Status{}, fmt.Errorf("the wrapper exited before it was ready: %w", err)
	}
	var st inner.Status
	if err := json.Unmarshal(line, &st); err != nil {
		return inner.Status{}, fmt.Errorf("decode the wrapper's report: %w", err)
	}
	return st, nil
}

func wrapperRefusal(st inner.Status, err error) *Refusal {
	if err != nil {
		return refuse(ReasonWrapper, "wrapper", "", "%v", err)
	}
	reason, field := st.Reason, "wrapper ("+st.Step+")"
	if reason == "" {
		reason = ReasonWrapper
	}
	switch reason {
	case ReasonWorkspace:
		field = "--workspace"
	case ReasonCommand:
		field = "argv[0]"
	}
	return refuse(reason, field, "", "%s", st.Error)
}

// exitStatus is the command's status: its exit code, or 128+n for signal n.
func exitStatus(ps *os.ProcessState) uint32 {
	if ps == nil {
		return 255
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + uint32(ws.Signal())
	}
	if c := ps.ExitCode(); c >= 0 {
		return uint32(c)
	}
	return 255
}
