package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
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
	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

func loggerFor(ctx context.Context, id string) *log.Entry {
	return log.G(ctx).WithField("container_id", id)
}

// Create admits the container, creates it with runc (init blocked in
// `runc init`), then installs and reads back its network table. Only then is
// Create answered; any failure after the inner Create rolls the task back.
func (s *service) Create(ctx context.Context, r *taskAPI.CreateTaskRequest) (_ *taskAPI.CreateTaskResponse, retErr error) {
	holdGC(gcBurstSettle)
	tc := time.Now()
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return nil, errgrpc.ToGRPC(err)
	}
	rt, err := config.ParseOptions(r.Options)
	if err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: %v", err)
	}
	cfg, err := s.loadConfig(rt.ConfigPath)
	if err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: admission refused: operator_config: %v", err)
	}
	// Before anything is mounted or loaded: the runc shim opens these as
	// root on the host.
	held, rf := holdStdio("task", &r.Stdin, &r.Stdout, &r.Stderr, cfg.LoggerAllowlist)
	if rf != nil {
		return nil, s.refused(ctx, cfg, ns, r.ID, rf)
	}
	defer func() { s.keepStdio(r.ID, "", held, retErr) }()
	// The catalog loads, and the snapshot mounts, beside the spec's read
	// and checks; only admit waits for them, so a spec refusal still
	// comes first. The overlay options that keep the upperdir honest are
	// forced before anything mounts the snapshot.
	hardenRootfs(r)
	// The rootfs mounts are the client's (WithRootFS): admitted before
	// anything mounts them as root on the host.
	if err := checkRootfs(r, cfg); err != nil {
		if rf, ok := spec.AsRefusal(err); ok {
			return nil, s.refused(ctx, cfg, ns, r.ID, rf)
		}
		return nil, errgrpc.ToGRPC(err)
	}
	catalog := s.loadCatalog(cfg)
	var mounting *earlyMount
	if len(r.Rootfs) > 0 {
		mounting = startEarlyMount(r)
		defer func() {
			if retErr != nil {
				mounting.undo(ctx, r)
			}
		}()
	}
	oci, err := observe.ReadSpec(r.Bundle)
	if err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: %v", err)
	}
	if r.Checkpoint != "" || r.ParentCheckpoint != "" {
		// runc would restore processes from a CRIU image with whatever
		// capabilities, seccomp state and sockets were dumped: nothing of
		// it would have been admitted.
		return nil, s.refused(ctx, cfg, ns, r.ID, refuse("checkpoint_restore", "the task is to be restored from checkpoint %q, whose processes were never admitted; start it from its image instead", r.Checkpoint+r.ParentCheckpoint))
	}
	kind, nsPath, uns, rf := namespacesOf(oci)
	if rf != nil {
		return nil, s.refused(ctx, cfg, ns, r.ID, rf)
	}
	runc, err := rt.RuncOptions(cfg)
	if err != nil {
		var or *config.OptionRefusal
		if errors.As(err, &or) {
			return nil, s.refused(ctx, cfg, ns, r.ID, spec.Refuse("runtime_options", "options."+or.Field, "", "%v", or))
		}
		return nil, errgrpc.ToGRPC(err)
	}
	var wantUserns nsID
	if uns.path != "" {
		if ns != CRINamespace {
			// Only a pod's user namespace (CRI pins it) may be joined;
			// elsewhere runc makes the container its own.
			return nil, s.refused(ctx, cfg, ns, r.ID, refuse("userns_path", "linux.namespaces user path %q: only CRI's pods join a user namespace by path; let runc make the container its own (drop the path)", uns.path))
		}
		if wantUserns, rf = checkJoinedUserns(uns.path, oci.Linux.UIDMappings); rf != nil {
			return nil, s.refused(ctx, cfg, ns, r.ID, rf)
		}
	}
	var wantNetns nsID
	if kind == netnsPath {
		if wantNetns, rf = checkJoinedNetns(nsPath, uns); rf != nil {
			return nil, s.refused(ctx, cfg, ns, r.ID, rf)
		}
	}
	if oci.Linux != nil {
		if err := refuseBusyCgroup(oci.Linux.CgroupsPath); err != nil {
			return nil, s.refusedOr(ctx, cfg, ns, r.ID, err)
		}
	}
	if rf := refuseJoinedNamespaces(oci); rf != nil {
		return nil, s.refused(ctx, cfg, ns, r.ID, rf)
	}
	netnsAlone, rf := checkJoinPaths(oci, scopeOf(ns, r.ID, r.Bundle, oci.Annotations), kernelNS{})
	if rf != nil {
		return nil, s.refused(ctx, cfg, ns, r.ID, rf)
	}
	if err := s.seccomp.check(runc.BinaryName, cfg.StateDir); err != nil {
		return nil, s.refused(ctx, cfg, ns, r.ID, refuse("seccomp_unavailable", "%v; the runtime closes the socket families nftables cannot see with seccomp, so it refuses to run without it: build runc with -tags seccomp (libseccomp) or point the operator config's [runc] BinaryName at one that has it", err))
	}
	t0 := time.Now()
	adm, err := s.admit(ctx, catalog, ns, r, oci, mounting)
	if err != nil {
		return nil, s.refusedOr(ctx, cfg, ns, r.ID, err)
	}
	// The snapshot is mounted at the bundle's rootfs (admit) and stays so
	// until Delete; until the inner Create has a task, it is ours to undo.
	ownRootfs, persisting := ownsSnapshot(r, oci), false
	defer func() {
		if retErr != nil {
			if !persisting {
				adm.close()
			}
			if ownRootfs {
				unmountRootfs(ctx, r.Bundle, r.ID)
			}
		}
	}()
	notes := []string{}
	binds, rf := resolveBindSources(oci)
	if rf != nil {
		return nil, s.refused(ctx, cfg, ns, r.ID, rf)
	}
	// The host facts (the mount table among them) are read once for both
	// the root and the spec checks.
	host := hostPolicy(cfg)
	host.StateDirs = runtimeStateDirs(cfg, r.Bundle, ns, r.ID)
	if rf := checkRoot(r, oci, host); rf != nil {
		return nil, s.refused(ctx, cfg, ns, r.ID, rf)
	}
	if n := privateCgroupns(oci); n != "" {
		notes = append(notes, n)
	}
	if ns == CRINamespace {
		// CRI's own annotation, set after the pass-through ones; only in
		// CRI's namespace, where only CRI creates containers.
		host.SandboxID = oci.Annotations[AnnotationSandboxID]
		// Its files lie under containerd's actual root (the operator's
		// containerd_root) and state (the bundle's, which containerd
		// lays out under it): k3s, RKE2 and any other root.
		host.CRISandboxDirs = specpolicy.CRISandboxDirs(cfg.ContainerdRoot, specpolicy.StateFromBundle(r.Bundle, ns, r.ID))
	}
	pol, err := specpolicy.CheckSpec(oci, specpolicy.Grants{Capabilities: adm.decision.Contract.Capabilities}, host)
	if err != nil {
		return nil, s.refusedOr(ctx, cfg, ns, r.ID, err)
	}
	pol.Notes = append(notes, pol.Notes...)

	op, err := s.newOperation(ns, r, cfg, adm, pol, kind, nsPath)
	if err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: %v", err)
	}
	op.wantNetns, op.userns, op.wantUserns, op.uidMappings = wantNetns, uns.has, wantUserns, oci.Linux.UIDMappings
	op.netnsAlone = netnsAlone
	op.admission.UserNamespace = uns.has
	op.ownRootfs, op.ownPidns = ownRootfs, privatePidns(oci)
	op.execPolicy = specpolicy.Operator{OOMScoreAdjFloor: host.OOMScoreAdjFloor, Init: specpolicy.InitRulesOf(oci.Process)}
	recorded := op.persist(adm)
	persisting = true
	if err := writeSpec(r.Bundle, oci); err != nil {
		recorded()
		return nil, errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: %v", err)
	}
	if r.Options, err = typeurl.MarshalAnyToProto(runc); err != nil {
		recorded()
		return nil, errgrpc.ToGRPC(err)
	}
	op.diff, op.mounts = diffSourceOf(r), specpolicy.MountDestinations(oci)
	if root, own := rootPath(r, oci); len(r.Rootfs) > 0 && !own {
		op.diff = diffSource{Problem: fmt.Sprintf("root.path %s is not the task's snapshot: the snapshot's diff says nothing about what the container wrote", root)}
	}
	// The snapshot is mounted already (admit): the inner Create runs runc
	// on it and mounts nothing; its TaskCreate still names the mounts.
	forget := s.pub.createdOn(r.ID, r.Rootfs)
	r.Rootfs = nil

	// What follows the inner Create: the records durable, the spec's bind
	// sources checked in the init's mount namespace, the boundary bound.
	// It runs as soon as runc has made the init (its pid file), beside the
	// inner Create's own work after runc, or else after the inner Create.
	var bindTook time.Duration
	bindInit := func(pid int) error {
		if recErr := recorded(); recErr != nil {
			if rf, ok := spec.AsRefusal(recErr); ok {
				// The hash taken while runc created the task refused it;
				// the init never left runc init.
				return s.refused(ctx, cfg, ns, r.ID, rolledBack(rf))
			}
			op.logger(ctx).WithError(recErr).Error("record operation")
			return errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: record operation: %v; task rolled back", recErr)
		}
		if err := verifyBinds(pid, oci, binds); err != nil {
			op.logger(ctx).WithError(err).Error("verify bind mounts")
			return errgrpc.ToGRPCf(errdefs.ErrPermissionDenied, "gensee: admission refused: bind_source: %v; task rolled back", err)
		}
		t := time.Now()
		defer func() { bindTook = time.Since(t) }()
		if err := op.bind(ctx, pid); err != nil {
			op.logger(ctx).WithError(err).Error("install network boundary")
			return errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: network boundary not installed, task refused: %v", err)
		}
		return nil
	}
	early := watchInitPid(r.Bundle, bindInit)

	t1 := time.Now()
	resp, err := s.TTRPCTaskService.Create(ctx, r)
	t2 := time.Now()
	if err != nil {
		forget()
		if _, berr := early.stop(); berr != errNotEarly {
			// Bound (or tried to) an init the inner Create then failed:
			// its records say so and end with a never-started manifest.
			s.unbind(ctx, op)
		}
		recorded()
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.rollback(ctx, op)
		}
	}()
	pid, err := early.stop()
	bound := "early"
	switch {
	case err == errNotEarly:
		bound = "after the inner create"
		err = bindInit(int(resp.Pid))
	case err == nil && pid != int(resp.Pid):
		s.unbind(ctx, op)
		err = errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: the init's pid file named pid %d, the inner Create pid %d; task rolled back", pid, resp.Pid)
	}
	if err != nil {
		return nil, err
	}
	if op.diff.Problem == "" {
		op.warm = startWarmGate(op.logger(ctx))
	}
	s.put(op)
	op.logger(ctx).WithField("contract", op.contract.ID).
		WithField("checks_ms", ms(t0.Sub(tc))).WithField("catalog_ms", ms(adm.catalogTook)).WithField("observe_ms", ms(adm.observeTook)).
		WithField("admission_ms", ms(t1.Sub(t0))).WithField("runc_create_ms", ms(t2.Sub(t1))).WithField("boundary_ms", ms(bindTook)).
		WithField("bound", bound).WithField("after_create_ms", ms(time.Since(t2))).
		Info("admitted; network boundary installed and read back")
	return resp, nil
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
		contract: *d.Contract, admission: rec, done: make(chan struct{}), innerExited: make(chan struct{}), ctx: s.ctx, pub: s.pub,
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
// rolls the task back if they failed (a *refusedError when complete
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
	return admission.Record(adm.decision, adm.catalog.Version, adm.catalog.Digest, adm.catalog.Catalog.ExpiresAt, adm.observation, adm.obsDigest)
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
