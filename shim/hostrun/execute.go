package hostrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/notify"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/telemetry"
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
	net    *engine.Boundary // the table in the host's netns, its monitor
	marked bool
}

// undo removes what the run still holds: the boundary (monitor and
// table), the cgroup, and, once both are gone, the marker. It reports
// whether anything is left, for the next run's cleanup.
func (r *run) undo(ctx context.Context, h *held) (left bool) {
	if h.net != nil {
		if h.net.Close(ctx) != "" {
			h.net = nil
		}
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
	if h.marked && h.cg == nil && h.net == nil {
		r.store.RemoveMarker(runsDir, r.id)
		h.marked = false
	}
	return h.cg != nil || h.net != nil
}

// abandon undoes a run refused after its operation was created: nothing
// of it is left, its refusal is logged.
func (r *run) abandon(ctx context.Context, h *held, rf *Refusal) *Refusal {
	r.discard(ctx, h)
	return refused(ctx, r.store, r.cmd.User, rf)
}

// notStarted ends a run whose command will not start: an error (err, the
// first of its failures) discards it and is the answer, else refusal rf
// abandons it.
func (r *run) notStarted(ctx context.Context, h *held, err error, rf *Refusal) error {
	if err != nil {
		r.discard(ctx, h)
		return err
	}
	return r.abandon(ctx, h, rf)
}

// discard undoes a run that will not start (held: what it holds) and,
// once nothing of it is left to clean (its marker gone with it), removes
// its record: a record begun for it, its reserve among it, would
// otherwise stay without a manifest and be kept as a running one. What
// could not be removed stays marked for the next run's cleanup.
func (r *run) discard(ctx context.Context, h *held) {
	r.undo(ctx, h)
	if !h.marked {
		r.store.Unindex(Namespace, r.id, r.id)
		r.store.RemoveOperation(r.id)
	}
}

// notifier is the run's notify command (notify_command), run as
// `gensee boundary run` runs (root, usually through sudo) with its
// environment; its container id is the operation id.
func (r *run) notifier() *notify.Notifier {
	return notify.New(notify.Config{Argv: r.req.Config.NotifyCommand, OperationID: r.id, ContainerID: r.id,
		Runtime: Runtime, Logger: r.log})
}

// execute creates the operation and its boundary, runs the wrapper, and
// runs the exit path. Ordering: the cgroup (marker first, so a crash
// leaves nothing unrecorded) and the wrapper born into it, started beside
// the admission (startEarly: sp); the operation's directory, then beside
// each other its index, its upper dir (the wrapper then gets its spec and
// builds the command's view) and the records' reserve, and the table,
// installed and read back with the NFLOG reader already bound
// (engine.Boundary.Bind), beside the admission's write and fsync under a
// temporary name (with its subject, the wrapper, and its table), renamed
// into place once the table is read back; then the sensors' start; the
// deadline; then the go, once the wrapper is ready and the record
// complete, and only then the exec. The wrapper is gensee's own code:
// nothing of the command runs before the go, so the table is in place
// first.
func (r *run) execute(ctx context.Context, exe *sealedCommand, sp *spawning) (_ *Result, retErr error) {
	// The parent ends with the run: its notify commands end first (each
	// bounded by its deadline), after the exit path.
	defer notify.Wait()
	id := r.id
	r.adm.OperationID, r.adm.ContainerID = id, id
	dir, err := r.store.OperationDir(id)
	if err != nil {
		sp.cancel(ctx, r)
		return nil, err
	}
	h := sp.h
	defer func() {
		if retErr != nil {
			r.undo(ctx, h)
		}
	}()
	// created: the operation's directory (the bind's events go there);
	// staged: its upper and work dirs (the wrapper's spec names them);
	// recorded: the whole record, its index and reserve too.
	created, staged, recorded := make(chan error, 1), make(chan made, 1), make(chan made, 1)
	go r.makeRecord(dir, created, staged, recorded)
	<-sp.done
	r.phases.fields["wrapper_start_ms"] = ms(sp.took) // beside the admission
	w, wrf, werr := sp.w, sp.rf, sp.err
	if wrf != nil || werr != nil {
		rec := <-recorded // the record is finished before it is undone
		return nil, r.notStarted(ctx, h, cmp.Or(rec.err, werr), wrf)
	}
	// The wrapper gets its spec once its upper dir is in place and builds
	// the command's view while the table is installed and read back; the
	// go waits for both, and for the record.
	ready := r.handOver(w, exe, filepath.Join(dir, upperDir), filepath.Join(dir, workDir), func() bool {
		st := <-staged
		return st.err == nil && st.rf == nil
	})
	// The admission, with its subject (the wrapper) and its table (named
	// by the operation: netpolicy.TableName), is written and fsynced
	// beside the table's install and read-back, and put in place after
	// them; the go waits for both.
	cerr := <-created
	srf := r.subject(w, h)
	prepared := r.prepareAdmission(cerr == nil && srf == nil)
	brf, berr := r.bindNetwork(ctx, h, cerr, srf == nil)
	rec := <-recorded
	// Before an undo: the write is done, the record can go.
	aerr := (<-prepared).admitted(berr == nil && brf == nil)
	r.phases.mark("record_bind")
	if aerr != nil {
		aerr = fmt.Errorf("record the admission: %w", aerr)
	}
	if err := cmp.Or(cerr, rec.err, berr, aerr); err != nil || srf != nil || rec.rf != nil || brf != nil {
		w.kill()
		<-ready
		w.close()
		return nil, r.notStarted(ctx, h, err, cmp.Or(srf, rec.rf, brf))
	}
	return r.runWrapper(ctx, h, w, ready)
}

// made is how a step of the record ended: a refusal, or another error.
type made struct {
	rf  *Refusal
	err error
}

// makeRecord makes the operation's record in dir: the directory
// (created), then its index beside the overlay's upper and work dirs
// (staged) and, before anything of the command can write, room for the
// records (recorded: all of it). Each channel gets one value; a failed
// step ends the ones after it with its error. The admission is written
// once its table and subject are known (recordAdmission).
func (r *run) makeRecord(dir string, created chan<- error, staged, recorded chan<- made) {
	if _, err := r.store.MakeOperationDir(r.id); err != nil {
		err = fmt.Errorf("create operation record: %w", err)
		created <- err
		staged <- made{err: err}
		recorded <- made{err: err}
		return
	}
	created <- nil
	indexed := make(chan error, 1)
	go func() { indexed <- r.store.IndexOperation(Namespace, r.id, r.id) }()
	m := made{}
	if err := makeUpper(filepath.Join(dir, upperDir), filepath.Join(dir, workDir), r.ws.Stat); err != nil {
		m.rf = refuse(ReasonWorkspace, "--workspace", "", "%v", err)
	}
	staged <- m
	if m.rf == nil {
		if err := reserveSpace(dir); err != nil {
			m.rf = refuse(ReasonOperatorConfig, "state_dir", "free space on the state dir's file system", "%v", err)
		}
	}
	if err := <-indexed; err != nil {
		m.err = fmt.Errorf("create operation record: %w", err)
	}
	recorded <- m
}

// spawn makes the run's cgroup (its marker first) and starts the wrapper
// in it.
func (r *run) spawn(h *held, exe *sealedCommand) (*wrapper, *Refusal, error) {
	me, err := cgroup.Self()
	if err != nil {
		return nil, nil, err
	}
	cgPath := ""
	if hier, err := cgroup.Find(); err == nil {
		cgPath = filepath.Join(hier.Root, ParentCgroup, r.id)
	}
	if err := writeMarker(r.store.Dir, marker{OperationID: r.id, Table: netpolicy.TableName(r.id), Cgroup: cgPath, OwnerPID: me.PID, OwnerStart: me.Start}); err != nil {
		return nil, nil, err
	}
	h.marked = true
	if h.cg, err = createCgroup(r.id); err != nil {
		return nil, refuse(ReasonCgroup, "cgroup2", "mount cgroup2 (hybrid hosts: at /sys/fs/cgroup/unified) and run as root in the initial cgroup namespace", "%v", err), nil
	}
	if h.cgFD, err = h.cg.open(); err != nil {
		return nil, refuse(ReasonCgroup, "cgroup2", "", "%v", err), nil
	}
	return r.startWrapper(h, exe)
}

// spawning is the run's cgroup and wrapper, started (spawn) beside the
// admission: done is closed once w, rf and err are set.
type spawning struct {
	h    *held
	done chan struct{}
	w    *wrapper
	rf   *Refusal
	err  error
	took time.Duration
}

// startEarly names the run's operation and starts its cgroup and wrapper
// (spawn) in the background, as soon as the command is sealed and
// observed: the wrapper's exec and start-up run beside the admission's
// decision. Nothing of the command can run: the wrapper waits for its
// spec, which it gets only once the admission is made and the record
// begun (execute), and a refused admission kills it (cancel) first.
func (r *run) startEarly(ctx context.Context, exe *sealedCommand) (*spawning, error) {
	id, err := record.NewOperationID()
	if err != nil {
		return nil, err
	}
	r.id = id
	r.log = log.G(ctx).WithField("operation_id", id)
	sp := &spawning{h: &held{}, done: make(chan struct{})}
	go func() {
		defer close(sp.done)
		t := time.Now()
		sp.w, sp.rf, sp.err = r.spawn(sp.h, exe)
		sp.took = time.Since(t)
	}()
	return sp, nil
}

// cancel undoes a spawn whose run will not go on (a refused admission):
// the wrapper killed, then its cgroup and marker removed.
func (sp *spawning) cancel(ctx context.Context, r *run) {
	<-sp.done
	if sp.w != nil {
		sp.w.kill()
		sp.w.close()
	}
	r.undo(ctx, sp.h)
}

// bindNetwork installs the run's table in the host's netns, bound to its
// cgroup, and reads it back: when the operation's directory was created
// (created: why not) and the run binds at all (bind). Its netlink sockets
// open in this process's own netns, the host's (engine.BindSpec.Own).
func (r *run) bindNetwork(ctx context.Context, h *held, created error, bind bool) (*Refusal, error) {
	if created != nil || !bind {
		return nil, created
	}
	f, err := os.Open("/proc/self/ns/net")
	if err != nil {
		return nil, err
	}
	h.net = engine.NewBoundary(spec.NetnsHost, r.log)
	plan, err := h.net.Bind(ctx, engine.BindSpec{OperationID: r.id, Network: r.contract.Network, Netns: f, Own: true, LogGroup: r.req.Config.LogGroup,
		Cgroup:  netpolicy.CgroupRef{ID: h.cg.ID, Level: cgroup.Level(h.cg.Path), Path: h.cg.Path},
		Monitor: telemetry.Config{OperationID: r.id, Store: r.store, Ctx: ctx, Logger: r.log, Notify: r.notifier().Finding}})
	switch {
	case errors.Is(err, engine.ErrPlan):
		return refuse(ReasonNetwork, "contract.network", "fix the contract's network section", "%v", err), nil
	case errors.Is(err, engine.ErrInstall):
		return refuse(ReasonNetwork, "nftables", "check that nftables with the socket cgroupv2 expression is available (gensee boundary audit --contract F says what this host enforces)", "%v", err), nil
	case err != nil:
		return nil, err
	}
	if plan.Table != r.adm.Table {
		return nil, fmt.Errorf("the table installed (%s) is not the one the admission names (%s)", plan.Table, r.adm.Table)
	}
	return nil, nil
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
