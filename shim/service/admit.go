package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/config"
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
	AnnotationContainerName    = "io.kubernetes.cri.container-name"
	AnnotationSandboxID        = "io.kubernetes.cri.sandbox-id"
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

// refusedError is an admission refusal: a reason code and a fix-it message.
type refusedError struct {
	Reason  string
	Message string
}

func (e *refusedError) Error() string {
	return "gensee: admission refused: " + e.Message
}

func refuse(reason, format string, args ...any) error {
	return &refusedError{Reason: reason, Message: reason + ": " + fmt.Sprintf(format, args...)}
}

// admitted is everything Create needs from a positive decision.
type admitted struct {
	decision    admission.Decision
	observation spec.Observation
	obsDigest   string
	catalog     *trust.Loaded
	facts       admission.Facts
	// How long the catalog's load and the observation took (Create's
	// log; they run side by side).
	catalogTook, observeTook time.Duration
}

// facts are the trusted facts about the caller of this Create.
func facts(namespace string, s *specs.Spec) admission.Facts {
	f := admission.Facts{ContainerdNamespace: namespace, Runtime: RuntimeName}
	if namespace == CRINamespace {
		f.K8sNamespace = s.Annotations[AnnotationSandboxNamespace]
	}
	return f
}

// admit decides which single contract governs the container, or refuses.
// It runs before anything is mounted for the task or created by runc.
func (s *service) admit(ctx context.Context, cfg config.Config, namespace string, r *taskAPI.CreateTaskRequest, oci *specs.Spec) (*admitted, error) {
	// The observation (a read-only mount, the executable hashed) and the
	// catalog's load and verification need nothing of each other: they run
	// side by side. Every return waits for the observation, which unmounts
	// what it mounted; a trust anchor or catalog refusal still comes first.
	type observed struct {
		obs  spec.Observation
		err  error
		took time.Duration
	}
	oc := make(chan observed, 1)
	go func() {
		t := time.Now()
		obs, err := s.observe(ctx, r, oci)
		oc <- observed{obs, err, time.Since(t)}
	}()
	t0 := time.Now()
	anchor, err := trust.LoadAnchor(cfg.TrustAnchor)
	if err != nil {
		<-oc
		return nil, refuse("trust_anchor", "%v", err)
	}
	cat, err := trust.LoadCatalog(cfg.Catalog, anchor, trust.NewFileState(trust.StateFile(cfg.StateDir)), s.now())
	if err != nil {
		<-oc
		return nil, refuse("catalog", "%v", err)
	}
	catalogTook := time.Since(t0)
	o := <-oc
	obs, err := o.obs, o.err
	var re *refusedError
	if errors.As(err, &re) {
		return nil, re
	}
	if err != nil {
		return nil, refuse("observation", "cannot derive the observation from the bundle: %v; check the image's entrypoint exists inside its rootfs", err)
	}
	f := facts(namespace, oci)
	d := admission.Decide(admission.Input{
		Catalog:              cat.Catalog,
		CatalogVersion:       cat.Version,
		Facts:                f,
		InferenceEnvelope:    []byte(annotation(namespace, oci.Annotations, AnnotationInference)),
		PreflightObservation: []byte(annotation(namespace, oci.Annotations, AnnotationObservation)),
		Observation:          obs,
		Now:                  s.now(),
	})
	if !d.Admitted {
		return nil, &refusedError{Reason: string(d.Reason), Message: d.Message}
	}
	digest, err := obs.Digest()
	if err != nil {
		return nil, fmt.Errorf("digest observation: %w", err)
	}
	return &admitted{decision: d, observation: obs, obsDigest: digest, catalog: cat, facts: f, catalogTook: catalogTook, observeTook: o.took}, nil
}

// observe re-derives the observation from the tree runc will run: the
// task's snapshot, mounted read-only in a private directory of the bundle
// and unmounted before the inner Create mounts it for real, or the spec's
// root.path when there is no snapshot or root.path names another tree
// (runc runs root.path, not the snapshot). A spec mount that covers the
// executable, a directory on the way to it, or a PATH entry searched
// before it is refused: runc would execute other bytes than those hashed.
func (s *service) observe(ctx context.Context, r *taskAPI.CreateTaskRequest, oci *specs.Spec) (_ spec.Observation, retErr error) {
	if root, own := rootPath(r, oci); len(r.Rootfs) == 0 || !own {
		return observeTree(root, oci)
	}
	dir, err := os.MkdirTemp(r.Bundle, ".gensee-observe-")
	if err != nil {
		return spec.Observation{}, fmt.Errorf("make observation mount point: %w", err)
	}
	defer os.Remove(dir)
	mounts := make([]mount.Mount, 0, len(r.Rootfs))
	for _, m := range r.Rootfs {
		mounts = append(mounts, mount.Mount{Type: m.Type, Source: m.Source, Target: m.Target, Options: append(append([]string(nil), m.Options...), "ro")})
	}
	if err := mount.All(mounts, dir); err != nil {
		return spec.Observation{}, fmt.Errorf("mount rootfs read-only: %w", err)
	}
	defer func() {
		if err := mount.UnmountMounts(mounts, dir, 0); err != nil && retErr == nil {
			retErr = fmt.Errorf("unmount observation rootfs: %w", err)
		}
	}()
	return observeTree(dir, oci)
}

// observeTree observes oci's process in tree and checks no mount covers it.
func observeTree(tree string, oci *specs.Spec) (spec.Observation, error) {
	obs, err := observe.FromRootfs(tree, oci)
	if err != nil {
		return spec.Observation{}, err
	}
	if err := observe.CheckMountsCover(tree, oci); err != nil {
		var ce *observe.CoveredError
		if errors.As(err, &ce) {
			return spec.Observation{}, refuse("entrypoint_mount", "%v; mount somewhere else, or bake the program into the image", ce)
		}
		return spec.Observation{}, err
	}
	return obs, nil
}

// checkRoot admits the spec's root.path: with a snapshot it must be the
// bundle's rootfs, where containerd mounts it (runc runs root.path, and
// the gate reads the snapshot); without one it is a host directory the
// caller chose, which must be read-only and no runtime's or kernel's tree.
// It is replaced by the path its symlinks resolve to.
func checkRoot(r *taskAPI.CreateTaskRequest, oci *specs.Spec, op specpolicy.Operator) error {
	root, own := rootPath(r, oci)
	if len(r.Rootfs) > 0 {
		if !own {
			return refuse("root_path", "root.path %s is not the bundle's rootfs, where the task's snapshot is mounted; leave root.path as \"rootfs\"", root)
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
		var rf *specpolicy.Refusal
		errors.As(err, &rf)
		return &refusedError{Reason: rf.Rule, Message: rf.Error()}
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
func (s *service) refused(ctx context.Context, cfg config.Config, namespace, id string, re *refusedError) error {
	loggerFor(ctx, id).WithField("reason", re.Reason).Warn(re.Message)
	st := record.Store{Dir: cfg.StateDir}
	if err := st.AppendRefusal(refusal{At: s.now().UTC(), Namespace: namespace, ContainerID: id, Reason: re.Reason, Message: re.Message}); err != nil {
		loggerFor(ctx, id).WithError(err).Error("record admission refusal")
	}
	ev := spec.Event{Kind: spec.EventAdmissionDenied, Control: "admission", Rule: re.Reason,
		Detail: re.Message, Target: id, At: s.now().UTC()}
	if err := events.Publish(s.ctx, s.pub, events.Sanitize(ev)); err != nil {
		loggerFor(ctx, id).WithError(err).Warn("publish admission_denied")
	}
	return errgrpc.ToGRPCf(errdefs.ErrPermissionDenied, "%s", re.Error())
}
