package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/shim/trust"
	"github.com/gensee/gensee/spec"
)

// Annotations read at admission. Their values are claims to verify, never
// decisions: neither can select a contract or a key.
const (
	AnnotationInference   = "io.gensee.boundary.inference"
	AnnotationObservation = "io.gensee.boundary.observation"

	// CRI sets these after the pass-through pod annotations, so a pod
	// cannot fake them; they are read only in CRI's own containerd
	// namespace, where only the CRI plugin creates containers.
	AnnotationSandboxNamespace = "io.kubernetes.cri.sandbox-namespace"
	AnnotationSandboxName      = "io.kubernetes.cri.sandbox-name"
	AnnotationSandboxUID       = "io.kubernetes.cri.sandbox-uid"
	AnnotationContainerName    = "io.kubernetes.cri.container-name"
	AnnotationSandboxID        = "io.kubernetes.cri.sandbox-id"
	AnnotationImageName        = "io.kubernetes.cri.image-name"
	CRINamespace               = "k8s.io"
)

// annotation returns the value of a gensee annotation key for this
// container. A Kubernetes Pod has annotations only at pod level, and CRI
// copies them into every container of the pod (the pause container too), so
// in CRI's namespace "<key>.<container name>" takes precedence over key:
// one pod can carry one inference per container.
func annotation(namespace string, a map[string]string, key string) string {
	if namespace == CRINamespace {
		if name := a[AnnotationContainerName]; name != "" {
			if v, ok := a[key+"."+name]; ok {
				return v
			}
		}
	}
	return a[key]
}

// RuntimeName is the runtime type this shim answers to.
const RuntimeName = "io.containerd.gensee.v2"

// refuse makes a refusal of this front door. The shim's messages start
// with the spec field they are about ("linux.cgroupsPath /a names ..."):
// that first word, when it is one, is the refusal's Field.
func refuse(reason, format string, args ...any) *spec.Refusal {
	msg := fmt.Sprintf(format, args...)
	return &spec.Refusal{Reason: reason, Field: leadingField(msg), Message: msg}
}

// specFields start the config.json paths a message may begin with.
var specFields = []string{"linux.", "mounts[", "process.", "root.", "hooks.", "annotations"}

// leadingField is msg's first word when it is a config.json path, else "".
func leadingField(msg string) string {
	w, _, _ := strings.Cut(msg, " ")
	w = strings.TrimSuffix(w, ":")
	for _, p := range specFields {
		if strings.HasPrefix(w, p) {
			return w
		}
	}
	return ""
}

// decisionRefusal is a negative admission decision as a refusal.
func decisionRefusal(d admission.Decision) *spec.Refusal {
	return d.Refusal()
}

// admitted is everything Create needs from a positive decision.
type admitted struct {
	decision admission.Decision // its Observation is the one decided on
	catalog  *trust.Loaded
	facts    admission.Facts
	// How long the catalog's load and the observation took (Create's
	// log; they run side by side).
	catalogTook, observeTook time.Duration
	// pending is the observation whose executable is still to be hashed
	// (nil once complete): without an inference or a preflight
	// observation to check, or an analyzer to ask (hashForAnalyzer), the
	// decision does not depend on the hash, so
	// complete takes it while runc creates the task (the init stays
	// blocked in runc init until Start) and decides again with it.
	pending *observe.Pending
	input   admission.Input // the decision's input, for complete
}

// complete hashes a pending observation and decides again with it. The
// decision must name the same contract on the same grounds as the one the
// task was created under; anything else refuses the task (Create rolls it
// back: no image code ran).
func (a *admitted) complete() error {
	p := a.pending
	if p == nil {
		return nil
	}
	a.pending = nil
	t := time.Now()
	obs, err := p.Hash()
	a.observeTook += time.Since(t)
	if err != nil {
		return observationRefusal(err)
	}
	in := a.input
	in.Observation = obs
	d := admission.Decide(in)
	if !d.Admitted {
		return decisionRefusal(d)
	}
	was := a.decision
	if d.ContractID != was.ContractID || d.ContractDigest != was.ContractDigest || d.Selector != was.Selector ||
		d.SafeDefault != was.SafeDefault || d.Reason != was.Reason || d.FallbackFrom != was.FallbackFrom || d.CatalogVersion != was.CatalogVersion {
		return refuse("observation", "the decision with the executable's hash (contract %q, %s) differs from the one the task was created under (contract %q, %s); create the task again", d.ContractID, d.Reason, was.ContractID, was.Reason)
	}
	if d.ObservationDigest == "" {
		return refuse("observation", "the observation with the executable's hash is incomplete; create the task again")
	}
	a.decision = d
	return nil
}

// observationRefusal refuses a task whose observation could not be
// derived.
func observationRefusal(err error) *spec.Refusal {
	return spec.Refuse("observation", "process.args", "", "cannot derive the observation from the bundle: %v; check the image's entrypoint exists inside its rootfs", err)
}

// close releases a pending observation that will not be completed.
func (a *admitted) close() {
	if a.pending != nil {
		a.pending.Close()
		a.pending = nil
	}
}

// catalogLoad is the catalog's load and verification against the trust
// anchor, started as soon as Create has the operator config, beside the
// spec's read and checks; admit waits for it.
type catalogLoad struct {
	done chan struct{}
	cat  *trust.Loaded
	err  *spec.Refusal
	took time.Duration
	// preloaded: the shim loaded it before Create came (preload); took
	// is then how long Create waited for it.
	preloaded bool
}

// loadCatalog is Create's catalog load: the preloaded one when it was
// for the same config (preload), else one started now.
func (s *service) loadCatalog(cfg config.Config) *catalogLoad {
	if l := s.preload.take(cfg, s.now); l != nil {
		return l
	}
	return startCatalog(cfg, s.now)
}

// startCatalog starts the catalog's load for cfg at now.
func startCatalog(cfg config.Config, now func() time.Time) *catalogLoad {
	l := &catalogLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.Now()
		defer func() { l.took = time.Since(t) }()
		l.cat, l.err = engine.LoadTrust(cfg, cfg.Catalog, "catalog", now())
	}()
	return l
}

// wait returns the loaded catalog or the refusal, and how long it took.
func (l *catalogLoad) wait() (*trust.Loaded, time.Duration, *spec.Refusal) {
	<-l.done
	return l.cat, l.took, l.err
}

// facts are the trusted facts about the caller of this Create.
func facts(namespace string, s *specs.Spec) admission.Facts {
	f := admission.Facts{ContainerdNamespace: namespace, Runtime: RuntimeName}
	if namespace == CRINamespace {
		f.K8sNamespace = s.Annotations[AnnotationSandboxNamespace]
	}
	return f
}

// kubernetesRef names the pod CRI created the container for, from CRI's
// own annotations (set after the pod's, read only in CRI's namespace): nil
// outside it or without a pod name. Recorded for a node daemon to address
// Kubernetes Events at the pod; admission never matches it.
func kubernetesRef(namespace string, oci *specs.Spec) *spec.KubernetesRef {
	if namespace != CRINamespace || oci == nil {
		return nil
	}
	a := oci.Annotations
	ref := &spec.KubernetesRef{Namespace: a[AnnotationSandboxNamespace], Pod: a[AnnotationSandboxName],
		PodUID: a[AnnotationSandboxUID], Container: a[AnnotationContainerName]}
	if ref.Namespace == "" || ref.Pod == "" {
		return nil
	}
	return ref
}

// admit decides which single contract governs the container, or refuses.
// It runs before runc creates anything for the task. The task's snapshot
// is mounted where runc runs it (mountRootfs): on a refusal admit unmounts
// it; otherwise Create owns that mount.
func (s *service) admit(ctx context.Context, load *catalogLoad, store record.Store, namespace string, r *taskAPI.CreateTaskRequest, oci *specs.Spec, early *earlyMount) (_ *admitted, retErr error) {
	if early != nil {
		early.taken = true
	}
	inference := []byte(annotation(namespace, oci.Annotations, AnnotationInference))
	preflight := []byte(annotation(namespace, oci.Annotations, AnnotationObservation))
	// The observation and the catalog's load and verification need
	// nothing of each other: they run side by side. Every return waits
	// for the observation; a trust anchor or catalog refusal still comes
	// first. The hash waits for runc only when nothing runs before the
	// image: with spec hooks (the operator's allowlisted ones run during
	// runc create) the decision is final before runc starts. Nor does it
	// wait when the selector's analyzer is asked, which needs the hash
	// (hashForAnalyzer hashes it once the catalog is known).
	hashNow := len(inference) > 0 || len(preflight) > 0 || specpolicy.HasHooks(oci)
	oc := s.startObservation(ctx, r, oci, early, hashNow)
	var o observed
	waitObserved := func() { o = <-oc }
	defer func() {
		if retErr != nil {
			if o.p != nil {
				o.p.Close()
			}
			if ownsSnapshot(r, oci) {
				unmountRootfs(ctx, r.Bundle, r.ID)
			}
		}
	}()
	cat, catalogTook, rf := load.wait()
	waitObserved()
	if rf != nil {
		return nil, rf
	}
	if rf, ok := spec.AsRefusal(o.err); ok {
		return nil, rf
	}
	if o.err != nil {
		return nil, observationRefusal(o.err)
	}
	f := facts(namespace, oci)
	if rf := hashForAnalyzer(&o, cat.Catalog, f, len(inference) > 0 || len(preflight) > 0); rf != nil {
		return nil, rf
	}
	in := admission.Input{
		Catalog:              cat.Catalog,
		CatalogVersion:       cat.Version,
		Facts:                f,
		InferenceEnvelope:    inference,
		PreflightObservation: preflight,
		Observation:          o.obs,
		// what observe.Prepare digested: process.args, env, cwd verbatim
		Command: spec.Command{Args: oci.Process.Args, Env: oci.Process.Env, Cwd: oci.Process.Cwd},
		Now:     s.now(),
		Ask:     engine.Asker(ctx, spec.DoorShim, store, criImage(namespace, oci.Annotations)),
	}
	adm := &admitted{decision: admission.Decide(in), catalog: cat, facts: f,
		catalogTook: catalogTook, observeTook: o.took, pending: o.p, input: in}
	o.p = nil // adm holds it now
	if !adm.decision.Admitted && adm.pending != nil {
		// A refusal names the observation's digest in its fix: decide
		// again with the hash.
		if err := adm.complete(); err != nil {
			return nil, err
		}
	}
	if !adm.decision.Admitted {
		return nil, decisionRefusal(adm.decision)
	}
	if adm.pending == nil && adm.decision.ObservationDigest == "" {
		adm.close()
		return nil, refuse("observation", "the observation admitted under %q is incomplete; check the image's entrypoint and the selector's volatile_env", adm.decision.ContractID)
	}
	return adm, nil
}

// hashForAnalyzer completes a pending observation now when the decision
// will ask the selector's node analyzer (no inference or preflight
// attached, and the one matching selector names an analyzer): the
// analyzer must see the executable's hash, and the decision is then made
// once, not again at complete.
func hashForAnalyzer(o *observed, cat *spec.Catalog, f admission.Facts, attached bool) *spec.Refusal {
	if o.p == nil || attached || !admission.NeedsAnalyzer(cat, f) {
		return nil
	}
	t := time.Now()
	p := o.p
	o.p = nil
	obs, err := p.Hash()
	o.took += time.Since(t)
	if err != nil {
		return observationRefusal(err)
	}
	o.obs = obs
	return nil
}

// criImage is the image reference CRI wrote for the container, told to
// the analyzer as a claim; "" outside CRI's namespace.
func criImage(namespace string, a map[string]string) string {
	if namespace != CRINamespace {
		return ""
	}
	return a[AnnotationImageName]
}

// observed is the observation admit waits for: pending (p) when its hash
// is left for later, else complete (obs), or the error.
type observed struct {
	p    *observe.Pending
	obs  spec.Observation
	err  error
	took time.Duration
}

// startObservation observes the task in the background (the rootfs
// mounted, the executable resolved and opened; hashed now only when
// hashNow, else a partial observation with the hash pending).
func (s *service) startObservation(ctx context.Context, r *taskAPI.CreateTaskRequest, oci *specs.Spec, early *earlyMount, hashNow bool) <-chan observed {
	oc := make(chan observed, 1)
	go func() {
		t := time.Now()
		p, err := s.observe(ctx, r, oci, early)
		o := observed{p: p, err: err}
		if err == nil && hashNow {
			o.p = nil
			o.obs, o.err = p.Hash()
		} else if err == nil {
			o.obs = p.Partial()
		}
		o.took = time.Since(t)
		oc <- o
	}()
	return oc
}

// observe prepares the observation from the tree runc will run: the
// task's snapshot, mounted where runc runs it (mountRootfs), or the
// spec's root.path when there is no snapshot or root.path names another
// tree (runc runs root.path, not the snapshot). A spec mount that covers
// the executable, a directory on the way to it, or a PATH entry searched
// before it is refused: runc would execute other bytes than those hashed.
func (s *service) observe(ctx context.Context, r *taskAPI.CreateTaskRequest, oci *specs.Spec, early *earlyMount) (*observe.Pending, error) {
	if early != nil {
		err := early.wait()
		if !ownsSnapshot(r, oci) {
			// root.path names another tree (checkRoot refuses it): the
			// snapshot goes, whatever of it mounted (mount.All leaves
			// the mounts before a failed one in place).
			unmountRootfs(ctx, r.Bundle, r.ID)
		}
		if err != nil {
			return nil, err // admit's own unmount covers the snapshot's rootfs
		}
	} else if ownsSnapshot(r, oci) {
		if err := mountRootfs(r); err != nil {
			return nil, err
		}
	}
	root, _ := rootPath(r, oci)
	return observeTree(root, oci)
}

// earlyMount is the task's snapshot being mounted at the bundle's rootfs
// (mountRootfs) from the moment Create has the request, beside the spec's
// read and checks: the mount needs nothing of the spec, and the
// observation then finds it done. Until admit takes it over (observe
// waits for it; admit's and Create's own unmounts cover it from then on),
// a refusal undoes it.
type earlyMount struct {
	done  chan struct{}
	err   error // mountRootfs's; read after done
	taken bool  // admit owns it; set by Create's goroutine only
}

func startEarlyMount(r *taskAPI.CreateTaskRequest) *earlyMount {
	m := &earlyMount{done: make(chan struct{})}
	go func() {
		defer close(m.done)
		m.err = mountRootfs(r)
	}()
	return m
}

func (m *earlyMount) wait() error {
	<-m.done
	return m.err
}

// undo unmounts an early mount admit never took over (a refusal before
// it), failed or not: mount.All leaves the mounts before a failed one in
// place.
func (m *earlyMount) undo(ctx context.Context, r *taskAPI.CreateTaskRequest) {
	if m == nil || m.taken {
		return
	}
	m.wait()
	unmountRootfs(ctx, r.Bundle, r.ID)
}

// mountRootfs mounts the task's snapshot at the bundle's rootfs, as the
// inner Create would (whose request then carries no rootfs mounts): the
// observation reads the tree runc runs, on the same mount. Create (or
// admit, on a refusal) unmounts it if the task is not created; the exit
// path's release once the task ran (unmountReleased), or Delete.
func mountRootfs(r *taskAPI.CreateTaskRequest) error {
	dir := filepath.Join(r.Bundle, "rootfs")
	if err := os.Mkdir(dir, 0o711); err != nil && !os.IsExist(err) {
		return fmt.Errorf("make rootfs mount point: %w", err)
	}
	mounts := make([]mount.Mount, 0, len(r.Rootfs))
	for _, m := range r.Rootfs {
		mounts = append(mounts, mount.Mount{Type: m.Type, Source: m.Source, Target: m.Target, Options: m.Options})
	}
	if err := mount.All(mounts, dir); err != nil {
		return fmt.Errorf("mount rootfs: %w", err)
	}
	return nil
}

// unmountRootfs unmounts what mountRootfs mounted (nothing when the task
// has no snapshot of its own there) and reports whether it did; failures
// are logged, as the runc shim does.
func unmountRootfs(ctx context.Context, bundle, id string) bool {
	if err := mount.UnmountRecursive(filepath.Join(bundle, "rootfs"), 0); err != nil {
		loggerFor(ctx, id).WithError(err).Warn("unmount rootfs")
		return false
	}
	return true
}

// observeTree prepares the observation of oci's process in tree and
// checks no mount covers it.
func observeTree(tree string, oci *specs.Spec) (*observe.Pending, error) {
	p, err := observe.Prepare(tree, oci)
	if err != nil {
		return nil, err
	}
	if err := observe.CheckMountsCover(tree, oci); err != nil {
		p.Close()
		var ce *observe.CoveredError
		if errors.As(err, &ce) {
			return nil, spec.Refuse("entrypoint_mount", "", "mount somewhere else, or bake the program into the image", "%v", ce)
		}
		return nil, err
	}
	return p, nil
}

// ownsSnapshot reports whether the task has a snapshot and runs it at the
// bundle's rootfs: the mount the shim makes there (mountRootfs) and undoes.
func ownsSnapshot(r *taskAPI.CreateTaskRequest, oci *specs.Spec) bool {
	_, own := rootPath(r, oci)
	return len(r.Rootfs) > 0 && own
}

// checkRoot admits the spec's root.path: with a snapshot it must be the
// bundle's rootfs, where containerd mounts it (runc runs root.path, and
// the gate reads the snapshot); without one it is a host directory the
// caller chose, which must be read-only and no runtime's or kernel's tree.
// It is replaced by the path its symlinks resolve to.
func checkRoot(r *taskAPI.CreateTaskRequest, oci *specs.Spec, op specpolicy.Operator) *spec.Refusal {
	root, own := rootPath(r, oci)
	if len(r.Rootfs) > 0 {
		if !own {
			return spec.Refuse("root_path", "root.path", "leave root.path as \"rootfs\"", "root.path %s is not the bundle's rootfs, where the task's snapshot is mounted", root)
		}
		return nil
	}
	resolved, err := filepath.EvalSymlinks(root)
	if err != nil {
		return refuse("root_path", "root.path %s: %v", root, err)
	}
	ro := oci.Root != nil && oci.Root.Readonly
	if b, err := filepath.EvalSymlinks(r.Bundle); own && err == nil && resolved == filepath.Join(b, "rootfs") {
		return nil // the bundle's own rootfs directory, no symlink out of it
	}
	if err := specpolicy.CheckRootPath(resolved, ro, op); err != nil {
		if rf, ok := spec.AsRefusal(err); ok {
			return rf
		}
		return refuse("root_path", "root.path %s: %v", resolved, err)
	}
	if oci.Root == nil {
		oci.Root = &specs.Root{}
	}
	oci.Root.Path = resolved
	return nil
}

// rootPath is the host path of the spec's root (relative to the bundle
// unless absolute) and whether it is the bundle's own rootfs, where
// containerd mounts the snapshot.
func rootPath(r *taskAPI.CreateTaskRequest, oci *specs.Spec) (string, bool) {
	root := "rootfs"
	if oci.Root != nil && oci.Root.Path != "" {
		root = oci.Root.Path
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(r.Bundle, root)
	}
	return root, filepath.Clean(root) == filepath.Join(r.Bundle, "rootfs")
}

// refused keeps a refusal that never became an operation — in the
// refusals log and as an admission_denied event — and returns the error the
// client sees: PermissionDenied with the reason and the fix.
func (s *service) refused(ctx context.Context, cfg config.Config, namespace, id string, pod *spec.KubernetesRef, rf *spec.Refusal) error {
	loggerFor(ctx, id).WithField("reason", rf.Reason).Warn(rf.Text())
	st := record.Store{Dir: cfg.StateDir}
	rec := rf.Record(s.now())
	rec.Namespace, rec.ContainerID, rec.Runtime, rec.Kubernetes = namespace, id, RuntimeName, pod
	if err := st.AppendRefusal(rec); err != nil {
		loggerFor(ctx, id).WithError(err).Error("record admission refusal")
	}
	ev := spec.Event{Kind: spec.EventAdmissionDenied, Control: "admission", Rule: rf.Reason,
		Detail: rf.Text(), Target: id, At: s.now().UTC()}
	if err := events.Publish(s.ctx, s.events, events.Sanitize(ev)); err != nil {
		loggerFor(ctx, id).WithError(err).Warn("publish admission_denied")
	}
	return errgrpc.ToGRPCf(errdefs.ErrPermissionDenied, "%s", rf.Error())
}

// rolledBack is rf for a task the inner Create made and the shim then
// rolled back.
func rolledBack(rf *spec.Refusal) *spec.Refusal {
	out := *rf
	if out.Fix != "" {
		out.Fix += "; "
	}
	out.Fix += "task rolled back"
	return &out
}
