package hostrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/hostrun/inner"
	"github.com/gensee/gensee/shim/monitor"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/notify"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Operation directory entries of a host run besides the records.
const (
	upperDir = "upper" // the overlay's upper dir: what the command wrote
	workDir  = "work"  // the overlay's work dir
)

// held is what a run holds until its exit path removed it, in the order it
// was taken. undo removes whatever is still held; idempotent.
type held struct {
	cg     *transient
	cgFD   *os.File
	netns  *os.File
	plan   *netpolicy.Plan
	mon    *monitor.Monitor
	marked bool
}

func (r *run) undo(ctx context.Context, h *held) {
	if h.mon != nil {
		h.mon.Close()
		h.mon = nil
	}
	if h.plan != nil && h.netns != nil {
		if err := netpolicy.RemoveIfPresent(ctx, int(h.netns.Fd()), h.plan.Table); err != nil {
			r.log.WithError(err).Error("remove network table")
		} else {
			h.plan = nil
		}
	}
	if h.netns != nil && h.plan == nil {
		h.netns.Close()
		h.netns = nil
	}
	if h.cgFD != nil {
		h.cgFD.Close()
		h.cgFD = nil
	}
	if h.cg != nil {
		if err := removeCgroup(ctx, h.cg.h, h.cg.Path); err != nil {
			r.log.WithError(err).Error("remove cgroup")
		} else {
			h.cg = nil
		}
	}
	if h.marked && h.cg == nil && h.plan == nil {
		r.store.RemoveMarker(runsDir, r.id)
		h.marked = false
	}
}

// abandon undoes a run refused after its operation was created: nothing
// of it is left, its refusal is logged.
func (r *run) abandon(ctx context.Context, h *held, rf *Refusal) *Refusal {
	r.undo(ctx, h)
	if !h.marked {
		r.store.Unindex(Namespace, r.id, r.id)
		r.store.RemoveOperation(r.id)
	}
	return refused(ctx, r.store, r.cmd.User, rf)
}

// notifier is the run's notify command (notify_command), run as
// `gensee boundary run` runs (root, usually through sudo) with its
// environment; its container id is the operation id.
func (r *run) notifier() *notify.Notifier {
	return notify.New(notify.Config{Argv: r.req.Config.NotifyCommand, OperationID: r.id, ContainerID: r.id,
		Runtime: Runtime, Logger: r.log})
}

// execute creates the operation and its boundary, runs the wrapper, and
// runs the exit path. Ordering: record; cgroup (marker first, so a crash
// leaves nothing unrecorded); table installed and read back with the NFLOG
// reader already bound; the wrapper born into the cgroup; its mounts; the
// sensors and the deadline; then the go, and only then the exec.
func (r *run) execute(ctx context.Context, exe *sealedCommand) (_ *Result, retErr error) {
	// The parent ends with the run: its notify commands end first (each
	// bounded by its deadline), after the exit path.
	defer notify.Wait()
	id, err := record.NewOperationID()
	if err != nil {
		return nil, err
	}
	r.id = id
	r.adm.OperationID, r.adm.ContainerID = id, id
	r.log = log.G(ctx).WithField("operation_id", id)
	dir, err := r.store.CreateOperation(id, Namespace, id)
	if err != nil {
		return nil, fmt.Errorf("create operation record: %w", err)
	}
	h := &held{}
	defer func() {
		if retErr != nil {
			r.undo(ctx, h)
		}
	}()
	if err := r.store.WriteJSON(id, record.AdmissionFile, r.adm); err != nil {
		return nil, err
	}
	upper, work := filepath.Join(dir, upperDir), filepath.Join(dir, workDir)
	if err := makeUpper(upper, work, r.ws.Stat); err != nil {
		return nil, r.abandon(ctx, h, refuse(ReasonWorkspace, "--workspace", "", "%v", err))
	}
	// Before anything of the command can write: room for the records.
	if err := reserveSpace(dir); err != nil {
		return nil, r.abandon(ctx, h, refuse(ReasonOperatorConfig, "state_dir", "free space on the state dir's file system", "%v", err))
	}
	me, err := cgroup.Self()
	if err != nil {
		return nil, err
	}
	cgPath := ""
	if hier, err := cgroup.Find(); err == nil {
		cgPath = filepath.Join(hier.Root, ParentCgroup, id)
	}
	if err := writeMarker(r.store.Dir, marker{OperationID: id, Table: netpolicy.TableName(id), Cgroup: cgPath, OwnerPID: me.PID, OwnerStart: me.Start}); err != nil {
		return nil, err
	}
	h.marked = true
	if h.cg, err = createCgroup(id); err != nil {
		return nil, r.abandon(ctx, h, refuse(ReasonCgroup, "cgroup2", "mount cgroup2 (hybrid hosts: at /sys/fs/cgroup/unified) and run as root in the initial cgroup namespace", "%v", err))
	}
	if h.cgFD, err = h.cg.open(); err != nil {
		return nil, r.abandon(ctx, h, refuse(ReasonCgroup, "cgroup2", "", "%v", err))
	}
	if h.netns, err = os.Open("/proc/self/ns/net"); err != nil {
		return nil, err
	}
	plan, err := netpolicy.NewPlanScoped(id, r.contract.Network, netpolicy.CgroupRef{ID: h.cg.ID, Level: cgroup.Level(h.cg.Path), Path: h.cg.Path}, netpolicy.ScopeCgroup)
	if err != nil {
		return nil, r.abandon(ctx, h, refuse(ReasonNetwork, "contract.network", "fix the contract's network section", "%v", err))
	}
	if r.req.Config.LogGroup != 0 {
		plan.LogGroup = r.req.Config.LogGroup
	}
	if h.mon, err = monitor.Open(monitor.Config{OperationID: id, Store: r.store, DenyRule: r.contract.Network.Mode,
		Ctx: ctx, Pub: noPublisher{}, Logger: r.log, Notify: r.notifier().Finding}, plan); err != nil {
		return nil, err
	}
	h.mon.OpenReader(int(h.netns.Fd()), plan, true)
	h.plan = plan
	if err := netpolicy.Apply(ctx, int(h.netns.Fd()), plan); err != nil {
		return nil, r.abandon(ctx, h, refuse(ReasonNetwork, "nftables", "check that nftables with the socket cgroupv2 expression is available (gensee boundary audit --contract F says what this host enforces)", "install and read back table %s: %v", plan.Table, err))
	}
	r.adm.Table = plan.Table
	return r.runWrapper(ctx, h, exe, upper, work)
}

// makeUpper creates the overlay's upper and work dirs; the upper dir's root
// takes the real workspace's owner and mode, since the merged root shows
// the upper's attributes.
func makeUpper(upper, work string, st unix.Stat_t) error {
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := os.Chown(upper, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("own upper dir: %w", err)
	}
	return os.Chmod(upper, os.FileMode(st.Mode&0o777)|modeBits(st.Mode))
}

func modeBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	if m&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	return out
}

// runWrapper starts the wrapper, lets it exec, waits for the command and
// runs the exit path.
func (r *run) runWrapper(ctx context.Context, h *held, exe *sealedCommand, upper, work string) (*Result, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ctlW.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		return nil, err
	}
	defer stR.Close()
	self := r.req.Self
	if self == "" {
		bin, err := openSandbox()
		if err != nil {
			ctlR.Close()
			stW.Close()
			return nil, r.abandon(ctx, h, refuse(ReasonWrapper, SandboxBinary, "", "%v", err))
		}
		defer bin.Close()
		self = "/proc/self/fd/" + strconv.Itoa(int(bin.Fd()))
	}
	stdio, err := newStdio(r.req.Stdin, r.req.Stdout, r.req.Stderr)
	if err != nil {
		ctlR.Close()
		stW.Close()
		return nil, r.abandon(ctx, h, refuse(ReasonWrapper, "stdio", "", "%v", err))
	}
	defer stdio.Close()
	extra := []*os.File{ctlR, stW, exe.Exe.File}
	if exe.Interp != nil {
		extra = append(extra, exe.Interp.File)
	}
	// A new mount, pid, ipc and uts namespace and a new session (no
	// controlling terminal), born in the cgroup after the table is in
	// place; the wrapper adds the cgroup namespace, the stage the user
	// namespace.
	c := &exec.Cmd{Path: self, Args: []string{"gensee", inner.WrapperArg}, Env: []string{},
		Stdin: stdio.in, Stdout: stdio.out, Stderr: stdio.err,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
			Setsid:     true, UseCgroupFD: true, CgroupFD: int(h.cgFD.Fd()),
		},
	}
	err = c.Start()
	ctlR.Close()
	stW.Close()
	stdio.started()
	if err != nil {
		return nil, r.abandon(ctx, h, refuse(ReasonWrapper, "wrapper", "", "start the wrapper in cgroup %s: %v", h.cg.Path, err))
	}
	ws := inner.Spec{Workspace: r.cmd.Workspace, WorkspaceDev: r.ws.ID.Dev, WorkspaceIno: r.ws.ID.Ino, Upper: upper, Work: work,
		UID: r.cmd.User.UID, GID: r.cmd.User.GID, Args: r.cmd.Args, Env: r.cmd.Env, InterpArgs: exe.InterpArgs,
		RuntimeFiles: r.req.Config.AllowedRuntimeFiles, OverlayOptions: gate.HardenOverlayOptions(nil)}
	if mnt, err := os.Readlink("/proc/self/ns/mnt"); err == nil {
		ws.HostMountNS = mnt
	}
	status := bufio.NewReader(stR)
	ready, err := handshake(ctlW, status, ws)
	if err != nil || !ready.Ready {
		c.Process.Kill()
		c.Wait()
		return nil, r.abandon(ctx, h, wrapperRefusal(ready, err))
	}
	pid := c.Process.Pid
	pst, err := cgroup.ReadStat(pid)
	if err != nil {
		c.Process.Kill()
		c.Wait()
		return nil, r.abandon(ctx, h, refuse(ReasonWrapper, "wrapper", "", "read the wrapper's start time: %v", err))
	}
	r.adm.Subject = &spec.Subject{InitPID: pid, StartTime: pst.Start, CgroupPath: h.cg.Path, CgroupID: h.cg.ID}
	if err := r.store.WriteJSON(r.id, record.AdmissionFile, r.adm); err != nil {
		r.log.WithError(err).Warn("record subject")
	}
	h.mon.Start(int(h.netns.Fd()), h.plan, cgroup.Proc{PID: pid, Start: pst.Start})
	started := time.Now()
	dl := r.startDeadline(h)
	stopSignals := r.forwardSignals(c.Process, h)
	if _, err := ctlW.Write([]byte{'g'}); err != nil {
		r.log.WithError(err).Warn("send go to the wrapper")
	}
	ctlW.Close()
	// The stage's applied line: the command runs. A failure line, or EOF
	// without the applied line: nothing of the command ran.
	applied, lingering, failed := readExec(status)
	if err := c.Wait(); err != nil && c.ProcessState == nil {
		r.log.WithError(err).Error("wait for the command")
	}
	stopSignals()
	hit := dl.stop()
	if failed != nil {
		h.mon.StopSensors()
		return nil, r.abandon(ctx, h, wrapperRefusal(*failed, nil))
	}
	sb := sandboxOf(ready, applied, stdio)
	return r.exit(ctx, h, exitFacts{status: exitStatus(c.ProcessState), started: started, Exit: engine.Exit{Deadline: hit}, sandbox: sb, stdio: stdio, lingering: lingering,
		writables: writables(r.cmd.Workspace, ready.Tmpfs)})
}

// readExec reads the status fd after the go until the wrapper exits: the
// stage's applied line, then (unless the cgroup was killed) the wrapper's
// lingering count; or a failure line, when nothing of the command ran.
func readExec(status *bufio.Reader) (*inner.Applied, int, *inner.Status) {
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

// deadline kills the run's cgroup when the contract's deadline passes.
type deadline struct {
	t   *time.Timer
	mu  sync.Mutex
	hit bool
}

func (r *run) startDeadline(h *held) *deadline {
	dl := &deadline{}
	d, err := r.contract.DeadlineDuration()
	if err != nil || d <= 0 {
		return dl
	}
	cg, mon := h.cg, h.mon
	dl.t = time.AfterFunc(d, func() {
		dl.mu.Lock()
		dl.hit = true
		dl.mu.Unlock()
		// Kill first: nothing (a blocked log write, a stopped terminal)
		// may hold up the kill.
		kerr := cg.kill()
		mon.Note(spec.Event{Kind: spec.EventDeadlineExceeded, Control: "deadline", Rule: r.contract.Deadline,
			Detail: "the contract deadline " + r.contract.Deadline + " passed; the command was killed"})
		if kerr != nil {
			r.log.WithError(kerr).Error("kill at deadline")
		}
		r.log.WithField("deadline", r.contract.Deadline).Warn("contract deadline exceeded; the command was killed")
	})
	return dl
}

func (dl *deadline) stop() bool {
	if dl.t != nil {
		dl.t.Stop()
	}
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return dl.hit
}

// forwardSignals forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the
// wrapper (which hands them to the command); Grace after the first, the
// cgroup is killed. SIGTSTP, SIGTTIN and SIGTTOU are ignored: nothing the
// command does to a terminal can stop the runner, so the deadline, the
// drain and the manifest always happen. The returned func stops
// forwarding.
func (r *run) forwardSignals(p *os.Process, h *held) func() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, inner.Forwarded...)
	signal.Ignore(unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	done := make(chan struct{})
	grace := r.req.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	cg := h.cg
	go func() {
		var kill <-chan time.Time
		for {
			select {
			case s := <-ch:
				p.Signal(s)
				r.log.WithField("signal", s.String()).Info("forwarded the signal to the command")
				if kill == nil {
					kill = time.After(grace)
				}
			case <-kill:
				cg.kill()
				r.log.Warn("the command outlived the grace after a forwarded signal; its cgroup was killed")
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// exit is the exit path: drain, gate, counters, table, cgroup, manifest.
func (r *run) exit(ctx context.Context, h *held, x exitFacts) (*Result, error) {
	k := drain.All(ctx, h.cg.Path, drain.StepsFor(h.mon))
	// Processes the command left were killed when it exited (pid 1's
	// kill); the drain kills whatever else is in the cgroup.
	x.Drained, x.DrainErr, x.Escapes = k.Drained+x.lingering, k.Err, k.Escapes
	// Every writer of the relayed pipes is gone with the cgroup: what the
	// command wrote reaches the caller before the verdict line.
	x.stdio.wait(2 * time.Second)
	dir, _ := r.store.OperationDir(r.id)
	timeout := r.req.Config.GateTimeout.Duration
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	gctx, cancel := context.WithTimeout(ctx, timeout)
	x.GateRan = true
	in := gate.Input{
		// The lower layer is the directory checked and mounted, through
		// its fd: never whatever the workspace path names at exit.
		UpperDir: filepath.Join(dir, upperDir), LowerDirs: []string{r.ws.FDPath()}, Workspace: "/",
		Products: r.contract.Products, StagingDir: filepath.Join(dir, record.StagedDir), StartTime: x.started,
		FailUnclaimed: r.contract.FailUnclaimed(),
	}
	if x.GateRes, x.GateErr = gate.Run(gctx, in); x.GateErr == nil {
		// Durable before the manifest below names them.
		if x.GateErr = gate.SyncStaged(in.StagingDir, x.GateRes); x.GateErr != nil {
			x.GateRes = nil
		}
	}
	cancel()
	// The command may have filled the state dir's file system through the
	// upper dir (the gate's staging then failed, and says so): the
	// reserve's blocks are what the events and the manifest are written
	// into.
	if err := releaseSpace(dir); err != nil {
		r.log.WithError(err).Error("release the records' reserve")
	}
	for _, ev := range engine.GateEvents(x.GateRes, x.GateErr) {
		h.mon.Note(ev)
	}
	h.mon.StopSensors()
	// A drift the table watcher saw downgrades the network status, as in
	// every front door (engine.NetworkStatus).
	x.Drift = h.mon.Drift()
	x.Attempts = h.mon.Finish(x.Counted(netpolicy.ReadCounters(ctx, int(h.netns.Fd()), h.plan)))
	r.undo(ctx, h)
	if h.plan == nil {
		x.Removed = spec.TableDeleted
	}
	m := r.manifest(x)
	if err := r.store.WriteJSON(r.id, record.ManifestFile, m); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, record.ManifestFile))
	if err != nil {
		return nil, err
	}
	if h.cg == nil && h.plan == nil {
		_ = r.store.MarkCleaned(r.id, "") // losing it only keeps the record longer
	} else {
		return nil, errors.New("the run's cgroup or table could not be removed; a later gensee boundary run retries")
	}
	return &Result{OperationID: r.id, Manifest: m, ManifestRaw: raw, Status: int(x.status)}, nil
}

// writables lists every place the command could write: the staged
// workspace and the private tmpfs the wrapper reported it mounted.
func writables(ws string, tmpfs []string) []string {
	out := []string{ws + " (staged: overlay upper dir in the operation record, read by the gate; the real workspace was the read-only lower layer)"}
	for _, d := range tmpfs {
		out = append(out, d+" (private tmpfs, discarded at exit)")
	}
	return out
}
