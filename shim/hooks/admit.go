package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/hostfacts"
	"github.com/gensee/gensee/shim/nsfile"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// Where a container's sockets live (admissionRecord.Netns).
const (
	netnsPrivate = spec.NetnsPrivate
	netnsPath    = spec.NetnsPath
	netnsHost    = spec.NetnsHost
)

// SeccompFix is the fix of a seccomp refusal: the profile the operator
// hands the engine instead of the merge the shim would make.
const SeccompFix = "run the container with the profile `gensee-oci-hook seccomp-profile` writes (podman: --security-opt seccomp=FILE, or seccomp_profile in containers.conf)"

// admitSpec runs every check that needs no kernel object of the container:
// namespaces, the spec policy on a copy, bind sources, root.path and the
// diff, the observation and the admission decision.
func admitSpec(ctx context.Context, cfg config.Config, s State, oci *specs.Spec, self string, now time.Time) (*admissionRecord, *Refusal) {
	kind, nsPath, rf := namespaces(oci)
	if rf != nil {
		return nil, rf
	}
	var nsID *nsfile.ID
	if kind == netnsPath {
		id, rf := checkNetnsPath(nsPath, s.Pid)
		if rf != nil {
			return nil, rf
		}
		nsID = &id
	}
	if rf := checkBinds(oci); rf != nil {
		return nil, rf
	}
	root := rootOf(s.Bundle, oci)
	diff := diffOf(root)
	op := hostfacts.Operator(cfg)
	if diff.Problem != "" {
		// Not an engine's overlay: a host directory, which must be
		// read-only and no runtime's or kernel's tree.
		if err := specpolicy.CheckRootPath(root, oci.Root != nil && oci.Root.Readonly, op); err != nil {
			return nil, specRefusal(err)
		}
	}
	obs, rf := observeRoot(root, oci)
	if rf != nil {
		return nil, rf
	}
	adm, rf := decide(ctx, cfg, oci, obs, now)
	if rf != nil {
		return nil, rf
	}
	res, rf := checkPolicy(oci, adm.Contract, op, self)
	if rf != nil {
		return nil, rf
	}
	adm.Engine = EngineOf(s.Annotations)
	adm.ContainerID, adm.Bundle, adm.RootPath, adm.Diff = s.ID, s.Bundle, root, diff
	adm.Netns, adm.NetnsPath, adm.NetnsID = kind, nsPath, nsID
	adm.Notes = res.Notes
	adm.Seccomp = &spec.SeccompEnforcement{SocketFamiliesRefused: res.Seccomp.FamiliesRefused, SyscallsRefused: res.Seccomp.SyscallsRefused}
	adm.Mounts = specpolicy.MountDestinations(oci)
	return adm, nil
}

// namespaces says where the container's sockets live and refuses what the
// hook cannot bind: a user namespace (the netns checks here accept only
// netns owned by the host's), any namespace but the network and UTS ones
// joined by path (a joined mount namespace holds another tree than the one
// observed, a joined cgroup namespace lets processes leave the bound
// cgroup, a joined pid/ipc one may be the host's), and a container without
// its own cgroup namespace (a hook cannot add one). The reading is
// specpolicy.ReadNamespaces, the one every door uses.
func namespaces(oci *specs.Spec) (kind spec.NetnsKind, path string, rf *Refusal) {
	if oci.Process == nil {
		return "", "", spec.Refuse("no_process", "process", "", "the spec has no process; gensee only runs containers with a process")
	}
	n := specpolicy.ReadNamespaces(oci)
	if n.User {
		return "", "", spec.Refuse(ReasonUserns, "linux.namespaces", "run it without a user namespace (no --userns, no --uidmap), or under the containerd shim, which admits them",
			"linux.namespaces has a user namespace, whose root would own the container's network namespace; this front door admits only network namespaces owned by the host's user namespace")
	}
	for _, ns := range n.Joined {
		if ns.Type != specs.NetworkNamespace && ns.Type != specs.UTSNamespace {
			return "", "", spec.Refuse(ReasonNamespacePath, ns.Field(), "drop the path (no --pid/--ipc/--cgroupns container:..., no path to another namespace)",
				"linux.namespaces %s path %q: a namespace joined by path may be the host's, hold another tree than the one observed, or let processes leave the bound cgroup", ns.Type, ns.Path)
		}
	}
	if !n.Cgroup || n.CgroupPath != "" {
		return "", "", spec.Refuse(ReasonCgroupns, "linux.namespaces", "run it with a private cgroup namespace (podman --cgroupns=private, or cgroupns = \"private\" in containers.conf)",
			"linux.namespaces has no cgroup namespace of the container's own: a process may move to any cgroup under its cgroup namespace's root (clone3 CLONE_INTO_CGROUP needs only a directory fd), out of the one the table binds, and a hook cannot add the namespace")
	}
	return n.Netns, n.NetnsPath, nil
}

// checkNetnsPath admits a netns joined by path: a network namespace file
// owned by the host's user namespace, whose root alone can change the
// table, that no process but the container's init (pid) is in. The
// netns podman makes for a container (netavark's, pinned under
// /run/netns) holds nobody yet; another container's (podman --network
// container:X, a podman pod's shared netns) or the host's named by path
// would give the workload that namespace's loopback, abstract sockets
// and ports, the rule the shim applies outside CRI (netns_in_use).
func checkNetnsPath(path string, pid int) (nsfile.ID, *Refusal) {
	f, err := nsfile.Open(path, unix.CLONE_NEWNET)
	if err != nil {
		return nsfile.ID{}, spec.Refuse("netns_path", "linux.namespaces", "join an existing network namespace file", "linux.namespaces network path %q: %v", path, err)
	}
	defer f.Close()
	ok, err := nsfile.OwnedByInitialUserns(f)
	if err != nil || !ok {
		return nsfile.ID{}, spec.Refuse(ReasonNetns, "linux.namespaces", "join a network namespace created by host root",
			"linux.namespaces network path %q is owned by a user namespace other than the host's, whose root can delete the container's network table", path)
	}
	id, err := nsfile.IDOf(f)
	if err != nil {
		return nsfile.ID{}, spec.Refuse("netns_path", "linux.namespaces", "", "linux.namespaces network path %q: %v", path, err)
	}
	other, err := nsfile.Occupant(id, pid)
	if err != nil {
		return nsfile.ID{}, spec.Refuse(ReasonNetnsInUse, "linux.namespaces", "", "linux.namespaces network path %q: cannot tell whether another process is in it: %v", path, err)
	}
	if other != 0 {
		return nsfile.ID{}, spec.Refuse(ReasonNetnsInUse, "linux.namespaces", "give the container a network of its own (podman's default bridge, --network=none, or --network=host); run pods that share a network namespace under the containerd shim through CRI",
			"linux.namespaces network path %q: process %d is already in this network namespace (another container's, a pod's or the host's): the workload would share its loopback, abstract sockets and ports", path, other)
	}
	return id, nil
}

// checkBinds: every absolute bind source exists and is already the path its
// symlinks resolve to. The shim rewrites sources to their resolved paths so
// the policy checks what mount(2) binds; a hook cannot, so it refuses a
// source that resolves elsewhere.
func checkBinds(oci *specs.Spec) *Refusal {
	for i, m := range oci.Mounts {
		bind := m.Type == "bind" || m.Type == "rbind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")
		if !bind || !filepath.IsAbs(m.Source) {
			continue
		}
		r, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return spec.Refuse(ReasonBindSource, fmt.Sprintf("mounts[%d].source", i), "bind an existing host path", "mounts[%d].source %s: %v", i, m.Source, err)
		}
		if r != m.Source {
			return spec.Refuse(ReasonBindSource, fmt.Sprintf("mounts[%d].source", i), "bind the resolved path "+r, "mounts[%d].source %s resolves to %s through a symlink", i, m.Source, r)
		}
	}
	return nil
}

// rootOf is the host path of the spec's root, relative to the bundle unless
// absolute, its symlinks resolved.
func rootOf(bundle string, oci *specs.Spec) string {
	root := "rootfs"
	if oci.Root != nil && oci.Root.Path != "" {
		root = oci.Root.Path
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(bundle, root)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		return r
	}
	return filepath.Clean(root)
}

// observeRoot derives the observation of the spec's process in root and
// refuses a mount that covers the executable.
func observeRoot(root string, oci *specs.Spec) (spec.Observation, *Refusal) {
	obs, err := observe.FromRootfs(root, oci)
	if err != nil {
		return spec.Observation{}, spec.Refuse(ReasonObservation, "process.args", "check the image's entrypoint exists inside its rootfs", "cannot derive the observation from root.path %s: %v", root, err)
	}
	if err := observe.CheckMountsCover(root, oci); err != nil {
		var ce *observe.CoveredError
		if errors.As(err, &ce) {
			return spec.Observation{}, refuse(ReasonEntrypoint, "mount somewhere else, or bake the program into the image", "%v", ce)
		}
		return spec.Observation{}, refuse(ReasonObservation, "", "%v", err)
	}
	return obs, nil
}

// decide loads the trust inputs and decides, as every door does
// (engine.LoadTrust, engine.Decide). Without an inference annotation, the
// selector's node analyzer is asked (engine.Asker): a Dockerfile's
// containers (BuildKit's OCI worker, podman build) carry none.
func decide(ctx context.Context, cfg config.Config, oci *specs.Spec, obs spec.Observation, now time.Time) (*admissionRecord, *Refusal) {
	cat, rf := engine.LoadTrust(cfg, cfg.Catalog, "catalog", now)
	if rf != nil {
		return nil, rf
	}
	f := facts()
	p := oci.Process // namespaces checked it is there
	rec, rf := engine.Decide(cat, admission.Input{Facts: f,
		InferenceEnvelope:    []byte(oci.Annotations[admission.AnnotationInference]),
		PreflightObservation: []byte(oci.Annotations[admission.AnnotationObservation]),
		Observation:          obs, Now: now,
		// what observe.Prepare digested: process.args, env, cwd verbatim
		Command: spec.Command{Args: p.Args, Env: p.Env, Cwd: p.Cwd},
		Ask:     engine.Asker(ctx, spec.DoorHooks, record.Store{Dir: cfg.StateDir}, "")})
	if rf != nil {
		return nil, rf
	}
	return &admissionRecord{Admission: spec.Admission{Namespace: Namespace, CreatedAt: now.UTC(), Facts: spec.AdmissionFacts{Runtime: f.Runtime},
		AdmissionDecision: rec, Deadline: rec.Contract.Deadline}}, nil
}

// checkPolicy runs the spec policy on a deep copy of the spec and refuses
// whenever it would change anything: a hook cannot edit the spec runc
// already read. CAP_NET_RAW and the seccomp merge are the two narrowings
// the policy makes; each gets its own fix. The hook's own entry in the
// spec's hooks is allowed whatever the operator's hook allowlist says.
func checkPolicy(oci *specs.Spec, c spec.Contract, op specpolicy.Operator, self string) (specpolicy.Result, *Refusal) {
	orig, err := json.Marshal(oci)
	if err != nil {
		return specpolicy.Result{}, refuse(ReasonSpecNarrowed, "", "encode the spec: %v", err)
	}
	var cp specs.Spec
	if err := json.Unmarshal(orig, &cp); err != nil {
		return specpolicy.Result{}, refuse(ReasonSpecNarrowed, "", "copy the spec: %v", err)
	}
	op.HookAllowlist = append(slices.Clone(op.HookAllowlist), ownHookPaths(oci, self)...)
	var old *specs.LinuxSeccomp
	if oci.Linux != nil {
		old = oci.Linux.Seccomp
	}
	// The container's profile is judged by SeccompHolds, not merged: the
	// merge cannot read its own output back (it conditions socket on the
	// protocol), which is what an operator hands the engine.
	if cp.Linux != nil {
		cp.Linux.Seccomp = nil
	}
	// The cgroup-bind rule's exception reads the container's own profile.
	op.Clone3ENOSYS = specpolicy.SeccompRefusesClone3(old)
	res, err := specpolicy.CheckSpec(&cp, specpolicy.Grants{Capabilities: c.Capabilities}, op)
	if err != nil {
		return res, specRefusal(err)
	}
	if len(res.CapabilitiesRemoved) > 0 {
		return res, spec.Refuse(ReasonCapNetRaw, "process.capabilities", "drop CAP_NET_RAW (podman --cap-drop NET_RAW, or leave it out of default_capabilities in containers.conf)",
			"process.capabilities hold CAP_NET_RAW (%v), which opens AF_PACKET and raw sockets past the network table; the shim removes it, a hook cannot", res.CapabilitiesRemoved)
	}
	if err := specpolicy.SeccompHolds(old, SeccompFix); err != nil {
		return res, specRefusal(err)
	}
	// Anything else the policy changed (it narrows nothing else today) is
	// refused too, rather than run unnarrowed.
	if cp.Linux != nil {
		cp.Linux.Seccomp = old
	}
	if oci.Linux == nil && cp.Linux != nil && cp.Linux.Seccomp == nil {
		cp.Linux = nil
	}
	after, err := json.Marshal(&cp)
	if err != nil || !bytes.Equal(orig, after) {
		return res, refuse(ReasonSpecNarrowed, "run it under the containerd shim, or change the spec as the policy would", "the spec policy would change the spec in a way this hook cannot apply")
	}
	return res, nil
}

// ownHookPaths are the spec's hook paths that are this binary.
func ownHookPaths(oci *specs.Spec, self string) []string {
	if oci.Hooks == nil || self == "" {
		return nil
	}
	want, err := os.Stat(self)
	if err != nil {
		return nil
	}
	var out []string
	//lint:ignore SA1019 runc still runs prestart hooks
	all := [][]specs.Hook{oci.Hooks.Prestart, oci.Hooks.CreateRuntime, oci.Hooks.CreateContainer, oci.Hooks.StartContainer, oci.Hooks.Poststart, oci.Hooks.Poststop}
	for _, hs := range all {
		for _, h := range hs {
			if fi, err := os.Stat(h.Path); err == nil && os.SameFile(fi, want) {
				out = append(out, h.Path)
			}
		}
	}
	return out
}

// specRefusal is the spec policy's refusal (its message starts with the
// field), or spec_narrowed for an error the policy could not judge by.
func specRefusal(err error) *Refusal {
	if rf, ok := spec.AsRefusal(err); ok {
		return rf
	}
	return refuse(ReasonSpecNarrowed, "", "%v", err)
}
