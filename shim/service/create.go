package service

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/log"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/runtimeopts"
	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

func loggerFor(ctx context.Context, id string) *log.Entry {
	return log.G(ctx).WithField("container_id", id)
}

// Create admits the container, creates it with runc (init blocked in
// `runc init`), then installs and reads back its network table. Only then is
// Create answered; any failure after the inner Create rolls the task back.
//
// Its steps, in order: the request checks (requestChecks), the catalog's
// load and the snapshot's mount started in the background, the spec's
// read and checks (specChecks), admit (the decision, then the bind
// sources, root and spec policy), persist (the operation and its records,
// the spec runc reads), the inner Create, and bind. A step fails with a
// *spec.Refusal or another error; failed turns either into Create's answer
// (the refusal recorded once) before what the steps acquired is undone,
// last first.
func (s *service) Create(ctx context.Context, r *taskAPI.CreateTaskRequest) (*taskAPI.CreateTaskResponse, error) {
	holdGC(gcBurstSettle)
	c := &creation{r: r, started: time.Now()}
	resp, err := s.create(ctx, c)
	if err != nil {
		err = s.failed(ctx, c, err)
		for i := len(c.undo) - 1; i >= 0; i-- {
			c.undo[i]()
		}
	}
	if c.held != nil {
		s.keepStdio(r.ID, "", c.held, err)
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// creation is one Create's state, filled in by its steps in order. Only
// Create's goroutine touches it, but for bindInit, which runs on the early
// bind's goroutine while Create waits for it (earlyBind.stop).
type creation struct {
	r       *taskAPI.CreateTaskRequest
	ns      string
	rt      runtimeopts.Runtime
	cfg     config.Config
	started time.Time
	// undo is what a failed Create undoes, last first.
	undo []func()

	// The request checks and the background work.
	held     *heldStdio
	catalog  *catalogLoad
	mounting *earlyMount

	// The spec and its checks.
	oci                   *specs.Spec
	runc                  *runcoptions.Options
	runcPath              string               // the admitted runc binary, as checkSeccomp found it
	handed                *runcoptions.Options // the runc options the inner service got (handRunc)
	kind                  netnsKind
	nsPath                string
	uns                   userns
	wantUserns, wantNetns nsID
	netnsAlone            bool

	// admit.
	admitAt    time.Time
	adm        *admitted
	ownRootfs  bool
	persisting bool // persist owns adm: only it closes a pending observation
	binds      []boundSource
	host       specpolicy.Operator
	pol        specpolicy.Result

	// persist, the inner Create and bind.
	op                *operation
	recorded          func() error
	forget            func()
	runcAt, createdAt time.Time
	bindTook          time.Duration
	bound             string
}

// failed is Create's answer to err, the one place a refusal is applied: a
// *spec.Refusal is kept in the refusals log and as an admission_denied
// event and answered PermissionDenied (refused); any other error is
// answered as the internal error it is.
func (s *service) failed(ctx context.Context, c *creation, err error) error {
	if rf, ok := spec.AsRefusal(err); ok {
		if rf.Selector == "" && c.adm != nil {
			rf.Selector = c.adm.decision.Selector
		}
		return s.refused(ctx, c.cfg, c.ns, c.r.ID, kubernetesRef(c.ns, c.oci), rf)
	}
	return errgrpc.ToGRPC(err)
}

// create runs Create's steps.
func (s *service) create(ctx context.Context, c *creation) (*taskAPI.CreateTaskResponse, error) {
	if err := s.preflight(ctx, c); err != nil {
		return nil, err
	}
	if err := s.admitTask(ctx, c); err != nil {
		return nil, err
	}
	if err := s.persistTask(c); err != nil {
		return nil, err
	}
	resp, early, err := s.createInner(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := s.bindTask(ctx, c, early, int(resp.Pid)); err != nil {
		return nil, err
	}
	l := c.op.logger(ctx).WithField("contract", c.op.contract.ID).
		WithField("checks_ms", ms(c.admitAt.Sub(c.started))).WithField("catalog_ms", ms(c.adm.catalogTook)).WithField("observe_ms", ms(c.adm.observeTook)).
		WithField("admission_ms", ms(c.runcAt.Sub(c.admitAt))).WithField("runc_create_ms", ms(c.createdAt.Sub(c.runcAt))).WithField("boundary_ms", ms(c.bindTook)).
		WithField("baseline_ms", ms(c.op.baselineDur)).WithField("baseline_entries", c.op.baselineEntries()).
		WithField("bound", c.bound).WithField("after_create_ms", ms(time.Since(c.createdAt)))
	if c.catalog.preloaded {
		l = l.WithField("catalog", "preloaded")
	}
	if a := c.adm.decision.Analyzer; a != nil {
		l = l.WithField("analyzer", a.Analyzer).WithField("analyzer_outcome", a.Outcome).WithField("analyzer_ms", ms(time.Duration(a.TookMicros)*time.Microsecond))
	}
	l.Info("admitted; network boundary installed and read back")
	return resp, nil
}

// preflight reads what Create is asked and runs every check that needs no
// decision: the request checks first (before anything is mounted or
// loaded), then, with the catalog loading and the snapshot mounting in the
// background, the spec checks. Only admit waits for the background work,
// so a spec refusal still comes first.
func (s *service) preflight(ctx context.Context, c *creation) error {
	var err error
	if c.ns, err = namespaces.NamespaceRequired(ctx); err != nil {
		return err
	}
	if c.rt, err = runtimeopts.ParseOptions(c.r.Options); err != nil {
		return errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: %v", err)
	}
	if c.cfg, err = s.loadConfig(c.rt.ConfigPath); err != nil {
		return errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: admission refused: operator_config: %v", err)
	}
	// The overlay options that keep the upperdir honest are forced before
	// anything mounts the snapshot.
	hardenRootfs(c.r)
	if rf := runChecks(s, c, requestChecks); rf != nil {
		return rf
	}
	c.catalog = s.loadCatalog(c.cfg)
	if len(c.r.Rootfs) > 0 {
		m := startEarlyMount(c.r)
		c.mounting = m
		c.undo = append(c.undo, func() { m.undo(ctx, c.r) })
	}
	if c.oci, err = observe.ReadSpec(c.r.Bundle); err != nil {
		return errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: %v", err)
	}
	if rf := runChecks(s, c, specChecks); rf != nil {
		return rf
	}
	return nil
}

// admitTask decides the contract (admit), then admits what the decision
// grants: the bind sources, the spec's root and the spec policy. From
// admit on, the snapshot is mounted at the bundle's rootfs and stays so
// until the exit path's release or Delete unmounts it; until the inner
// Create has a task, it is ours to undo.
func (s *service) admitTask(ctx context.Context, c *creation) error {
	r, oci := c.r, c.oci
	c.admitAt = time.Now()
	adm, err := s.admit(ctx, c.catalog, record.Store{Dir: c.cfg.StateDir}, c.ns, r, oci, c.mounting)
	if err != nil {
		return err
	}
	c.adm, c.ownRootfs = adm, ownsSnapshot(r, oci)
	c.undo = append(c.undo, func() {
		if !c.persisting {
			adm.close()
		}
		if c.ownRootfs {
			unmountRootfs(ctx, r.Bundle, r.ID)
		}
	})
	notes := []string{}
	var rf *spec.Refusal
	if c.binds, rf = resolveBindSources(oci); rf != nil {
		return rf
	}
	// The host facts (the mount table among them) are read once for both
	// the root and the spec checks.
	c.host = hostPolicy(c.cfg)
	c.host.StateDirs = runtimeStateDirs(c.cfg, r.Bundle, c.ns, r.ID)
	if rf := checkRoot(r, oci, c.host); rf != nil {
		return rf
	}
	if n := privateCgroupns(oci); n != "" {
		notes = append(notes, n)
	}
	if c.ns == CRINamespace {
		// CRI's own annotation, set after the pass-through ones; only in
		// CRI's namespace, where only CRI creates containers.
		c.host.SandboxID = oci.Annotations[AnnotationSandboxID]
		// Its files lie under containerd's actual root (the operator's
		// containerd_root) and state (the bundle's, which containerd
		// lays out under it): k3s, RKE2 and any other root.
		c.host.CRISandboxDirs = specpolicy.CRISandboxDirs(c.cfg.ContainerdRoot, specpolicy.StateFromBundle(r.Bundle, c.ns, r.ID))
	}
	if c.pol, err = specpolicy.CheckSpec(oci, specpolicy.Grants{Capabilities: adm.decision.Contract.Capabilities}, c.host); err != nil {
		return err
	}
	c.pol.Notes = append(notes, c.pol.Notes...)
	return nil
}

// persistTask builds the operation and starts persisting it (the
// operation's persist: the records are written while runc works), then
// writes the spec and the runtime options runc is handed. The snapshot is
// mounted already (admit): the inner Create runs runc on it and mounts
// nothing; its TaskCreate still names the mounts.
func (s *service) persistTask(c *creation) error {
	r, oci := c.r, c.oci
	op, err := s.newOperation(c.ns, r, c.cfg, c.adm, c.pol, c.kind, c.nsPath)
	if err != nil {
		return errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: %v", err)
	}
	op.wantNetns, op.userns, op.wantUserns, op.uidMappings = c.wantNetns, c.uns.has, c.wantUserns, oci.Linux.UIDMappings
	op.netnsAlone = c.netnsAlone
	op.admission.UserNamespace = c.uns.has
	op.admission.Kubernetes = kubernetesRef(c.ns, oci)
	op.ownRootfs, op.ownPidns, op.specHooks = c.ownRootfs, privatePidns(oci), specpolicy.HasHooks(oci)
	op.execPolicy = specpolicy.Operator{OOMScoreAdjFloor: c.host.OOMScoreAdjFloor, Init: specpolicy.InitRulesOf(oci.Process)}
	c.op, c.recorded, c.persisting = op, op.persist(c.adm), true
	// The spec and the runc front's files are other files of the bundle:
	// written side by side.
	var handed *runcoptions.Options
	hand := inBackground(func() (err error) {
		handed, err = s.handRunc(r.Bundle, c.runc, c.runcPath)
		return err
	})
	werr := writeSpec(r.Bundle, oci)
	if herr := hand(); werr == nil {
		werr = herr
	}
	if werr != nil {
		c.recorded()
		return errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: %v", werr)
	}
	c.handed = handed
	if r.Options, err = typeurl.MarshalAnyToProto(handed); err != nil {
		c.recorded()
		return err
	}
	op.diff, op.mounts = diffSourceOf(r), specpolicy.MountDestinations(oci)
	if root, own := rootPath(r, oci); len(r.Rootfs) > 0 && !own {
		op.diff = diffSource{Problem: fmt.Sprintf("root.path %s is not the task's snapshot: the snapshot's diff says nothing about what the container wrote", root)}
	}
	c.forget = s.pub.createdOn(r.ID, r.Rootfs)
	r.Rootfs = nil
	return nil
}

// createInner runs the inner (runc) Create, with the bind watching for
// the init's pid file (watchInitPid) so that it runs as soon as runc has
// made the init, beside the inner Create's own work after runc. From a
// created task on, a failure rolls the task back.
func (s *service) createInner(ctx context.Context, c *creation) (*taskAPI.CreateTaskResponse, *earlyBind, error) {
	c.runcAt = time.Now()
	// Set before the bind's goroutine starts, which records it.
	c.op.admitTook = c.runcAt.Sub(c.started)
	early := watchInitPid(c.r.Bundle, func(pid int) error { return s.bindInit(ctx, c, pid) })
	resp, err := s.TTRPCTaskService.Create(ctx, c.r)
	c.createdAt = time.Now()
	if err != nil {
		c.forget()
		_, berr := early.stop()
		if berr != errNotEarly {
			// Bound (or tried to) an init the inner Create then failed:
			// its records say so and end with a never-started manifest.
			s.unbind(ctx, c.op)
		}
		c.recorded()
		if rf, ok := spec.AsRefusal(berr); ok {
			// The decision with the hash refused the task while runc made
			// it: the refusal is the answer, whatever runc then said.
			c.op.logger(ctx).WithError(err).Warn("inner create, after the refusal")
			return nil, nil, rf
		}
		return nil, nil, err
	}
	c.undo = append(c.undo, func() { s.rollback(ctx, c.op) })
	if err := s.toFront(c.r.Bundle, c.handed); err != nil {
		c.op.logger(ctx).WithError(err).Warn("the task's runc stays the real runc: link it to the front")
	}
	return resp, early, nil
}

// bindTask ends the bind: the early one's result, or the bind itself
// when runc's pid file was not seen before the inner Create returned.
func (s *service) bindTask(ctx context.Context, c *creation, early *earlyBind, initPid int) error {
	pid, err := early.stop()
	c.bound = "early"
	switch {
	case err == errNotEarly:
		c.bound = "after the inner create"
		err = s.bindInit(ctx, c, initPid)
	case err == nil && pid != initPid:
		s.unbind(ctx, c.op)
		err = errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: the init's pid file named pid %d, the inner Create pid %d; task rolled back", pid, initPid)
	}
	if err != nil {
		return err
	}
	if c.op.diff.Problem == "" {
		c.op.warm = newWarmGate(c.op.logger(ctx))
	}
	s.put(c.op)
	engine.WarmManifest()
	return nil
}

// bindInit is what follows the inner Create for the init pid: the records
// durable, the spec's bind sources checked in the init's mount namespace,
// the boundary bound. A refusal (the hash taken while runc created the
// task refused it; the init never left runc init) is returned for failed
// to apply.
func (s *service) bindInit(ctx context.Context, c *creation, pid int) error {
	op := c.op
	if err := c.recorded(); err != nil {
		if rf, ok := spec.AsRefusal(err); ok {
			return rolledBack(rf)
		}
		op.logger(ctx).WithError(err).Error("record operation")
		return errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: record operation: %v; task rolled back", err)
	}
	if err := verifyBinds(pid, c.oci, c.binds); err != nil {
		op.logger(ctx).WithError(err).Error("verify bind mounts")
		return errgrpc.ToGRPCf(errdefs.ErrPermissionDenied, "gensee: admission refused: bind_source: %v; task rolled back", err)
	}
	t := time.Now()
	defer func() { c.bindTook = time.Since(t) }()
	if err := op.bind(ctx, pid); err != nil {
		if rf, ok := spec.AsRefusal(err); ok { // the upperdir's baseline
			// Refused before the table: the refusal line is all that
			// stays (docs/design.md §13 I1), not the record persist made.
			op.store.Unindex(op.namespace, op.containerID, op.id)
			op.store.RemoveOperation(op.id)
			return rolledBack(rf)
		}
		op.logger(ctx).WithError(err).Error("install network boundary")
		return errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: network boundary not installed, task refused: %v", err)
	}
	return nil
}

// newOperation builds the operation and its admission record; persist
// writes them.
func (s *service) newOperation(ns string, r *taskAPI.CreateTaskRequest, cfg config.Config, adm *admitted, pol specpolicy.Result, kind netnsKind, nsPath string) (*operation, error) {
	id, err := record.NewOperationID()
	if err != nil {
		return nil, err
	}
	st := record.Store{Dir: cfg.StateDir}
	d := adm.decision
	capsRemoved := append([]string{}, pol.CapabilitiesRemoved...)
	seccomp := &spec.SeccompEnforcement{ProfileCreated: pol.Seccomp.Created,
		SocketFamiliesRefused: pol.Seccomp.FamiliesRefused, SyscallsRefused: pol.Seccomp.SyscallsRefused}
	rec := &spec.Admission{
		OperationID: id, Namespace: ns, ContainerID: r.ID, CreatedAt: s.now().UTC(),
		Facts:               recordFacts(adm.facts),
		AdmissionDecision:   admissionRecord(adm),
		CapabilitiesRemoved: capsRemoved, Seccomp: seccomp, Notes: pol.Notes, Netns: kind, NetnsPath: nsPath,
		Deadline: d.Contract.Deadline,
	}
	op := &operation{
		id: id, namespace: ns, containerID: r.ID, bundle: r.Bundle, cfg: cfg, store: st,
		contract: *d.Contract, admission: rec, done: make(chan struct{}), innerExited: make(chan struct{}), ctx: s.ctx, pub: s.events,
	}
	op.net = engine.NewBoundary(kind, op.logger(s.ctx))
	op.exit = exitPipelineFor(op)
	return op, nil
}

// persist completes the admission (a pending observation hashed and the
// decision taken again with it: admitted.complete), then creates the
// operation's directory, index and admission.json (each fsynced), while
// the caller goes on to the inner Create; it returns the wait for it (safe
// to call more than once). This runs while runc works: the init stays
// blocked in runc init until Start, so the decision is final and the
// records are durable before anything of the image runs, and the hash and
// the journal commits leave Create's path. Create waits before it binds
// the boundary (the monitor's log lives in the operation's directory) and
// rolls the task back if they failed (a *spec.Refusal when complete
// refused it: nothing is written then). Until the wait returns, only
// persist touches op.admission.
func (op *operation) persist(adm *admitted) func() error {
	return inBackground(func() error {
		if adm.pending != nil {
			if err := adm.complete(); err != nil {
				return err
			}
			op.admission.AdmissionDecision = admissionRecord(adm)
		}
		rec := *op.admission
		if _, err := op.store.CreateOperation(op.id, op.namespace, op.containerID); err != nil {
			return err
		}
		return op.store.WriteJSON(op.id, record.AdmissionFile, &rec)
	})
}

// admissionRecord is the decision as admission.json records it.
func admissionRecord(adm *admitted) admission.Recorded {
	return admission.Record(adm.decision, adm.catalog.Version, adm.catalog.Digest, adm.catalog.Catalog.ExpiresAt)
}

// inBackground runs fn in its own goroutine and returns the wait for its
// result (safe to call more than once, from any goroutine).
func inBackground(fn func() error) (wait func() error) {
	done := make(chan struct{})
	var err error // written before done is closed
	go func() {
		defer close(done)
		err = fn()
	}()
	return func() error { <-done; return err }
}

// unbind ends a boundary bound early for a task Create then does not
// answer for: the bound record is waited for, then finalized as a task
// that never started (table removed, not_run manifest), so the records
// end as honestly as a Delete of a created task would leave them.
func (s *service) unbind(ctx context.Context, op *operation) {
	ctx = context.WithoutCancel(ctx)
	if op.recorded != nil { // bound: the records name the table
		if err := op.waitRecorded(); err != nil {
			op.logger(ctx).WithError(err).Warn("bound admission record")
		}
		op.exit.NeverStarted(ctx)
	}
	op.net.Close(ctx)
}

// rollback undoes an inner Create whose boundary could not be installed:
// kill the blocked init, delete the task (runc state, cgroup, mounts), and
// remove any table.
func (s *service) rollback(ctx context.Context, op *operation) {
	ctx = context.WithoutCancel(ctx)
	// The init only (it is still in runc init: nothing else of the task
	// exists yet), never "all": the cgroup may be one the task was refused
	// for sharing with processes that are not the task's.
	if _, err := s.TTRPCTaskService.Kill(ctx, &taskAPI.KillRequest{ID: op.containerID, Signal: uint32(unix.SIGKILL)}); err != nil {
		op.logger(ctx).WithError(err).Warn("rollback: kill")
	}
	if _, err := s.TTRPCTaskService.Delete(ctx, &taskAPI.DeleteRequest{ID: op.containerID}); err != nil {
		op.logger(ctx).WithError(err).Warn("rollback: delete")
	}
	op.net.Close(ctx)
	s.drop(op.containerID)
}

func writeSpec(bundle string, s *specs.Spec) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode bundle config: %w", err)
	}
	// Not fsynced, as containerd writes it: the bundle ends with the machine.
	return record.ReplaceFile(filepath.Join(bundle, "config.json"), b, 0o644)
}

// hardenRootfs forces the overlay options that keep the upperdir honest
// for the gate (no metacopy, no redirects): see gate.HardenOverlayOptions.
func hardenRootfs(r *taskAPI.CreateTaskRequest) {
	for _, m := range r.Rootfs {
		if m.Type == "overlay" {
			m.Options = gate.HardenOverlayOptions(m.Options)
		}
	}
}

// ms renders a duration in milliseconds for log fields.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
