package specpolicy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gensee/gensee/internal/fsafe"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// kernelTypes are the filesystems that expose kernel state; writable, each lets the
// workload reconfigure the host (cgroups, BPF, tracing, LSM policy, sysfs knobs).
var kernelTypes = []string{"cgroup", "cgroup2", "sysfs", "proc", "bpf", "debugfs", "tracefs", "securityfs"}

// plainTypes are the other filesystem types containerd's and CRI's default specs mount.
// Anything else (ext4 on a host disk, overlay over host dirs, nfs, fuse...) is refused:
// runc mounts it as root before any boundary exists.
var plainTypes = []string{"tmpfs", "devpts", "mqueue"}

// kernelRoots are the host paths where kernel filesystems live.
var kernelRoots = []string{"/proc", "/sys"}

var kernelMagics = map[int64]string{
	unix.PROC_SUPER_MAGIC:    "proc",
	unix.SYSFS_MAGIC:         "sysfs",
	unix.CGROUP_SUPER_MAGIC:  "cgroup",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	unix.BPF_FS_MAGIC:        "bpf",
	unix.DEBUGFS_MAGIC:       "debugfs",
	unix.TRACEFS_MAGIC:       "tracefs",
	unix.SECURITYFS_MAGIC:    "securityfs",
}

// runtimeRoots hold container runtimes' sockets and state: a workload that reaches one
// can start a container without any boundary. /var/lib/containerd holds every
// container's snapshots.
var runtimeRoots = []string{
	"/run/containerd", "/var/run/containerd", "/var/lib/containerd",
	"/run/gensee", "/var/run/gensee", "/var/lib/gensee",
	"/run/runc", "/var/run/runc",
	"/run/docker.sock", "/var/run/docker.sock", "/run/docker", "/var/run/docker", "/var/lib/docker",
	"/run/crio", "/var/run/crio",
	"/run/podman", "/var/run/podman",
	"/run/buildkit", "/var/run/buildkit",
}

var socketNames = []string{"containerd.sock", "containerd.sock.ttrpc", "docker.sock", "crio.sock", "podman.sock", "buildkitd.sock"}

// criSandboxFiles are the per-pod files CRI binds into every pod container from its own
// root and state dirs (internal/cri/server helpers.go getSandboxHosts & co).
var criSandboxFiles = []string{"hosts", "hostname", "resolv.conf", "shm"}

// checkMounts admits the spec's mounts and returns the destination of a mounted cgroup
// hierarchy, if any, for the cgroup-namespace rule, and the index of the first bind of a
// cgroup filesystem (-1: none), for the nsdelegate rule (checkCgroupBind).
func checkMounts(mounts []specs.Mount, op Operator) (cgroupMount string, cgroupBind int, err error) {
	cgroupBind = -1
	for i, m := range mounts {
		field := fmt.Sprintf("mounts[%d]", i)
		bind, recursive := bindKind(m)
		if !bind {
			if err := checkFSMount(m, field); err != nil {
				return "", -1, err
			}
			if m.Type == "cgroup" || m.Type == "cgroup2" {
				cgroupMount = m.Destination
			}
			continue
		}
		src := m.Source
		if !path.IsAbs(src) {
			// runc joins it to the bundle and follows symlinks on the host
			// side, through the image's own files once the rootfs is mounted.
			return "", -1, refuse(RuleMountType, field,
				"the spec binds %q, a relative source (runc would resolve it through the bundle and the image's symlinks); use an absolute host path", src)
		}
		src = path.Clean(src)
		if err := checkRuntimeBind(src, field, op); err != nil {
			return "", -1, err
		}
		var subs []string
		if recursive {
			subs = submounts(src, op)
		}
		if t := exposedFS(src, recursive, subs, op); t != "" {
			return "", -1, refuse(RuleKernelFSExposed, field,
				"the spec binds %s, which carries %s into the container; read-only does not help: /proc/<pid>/root and /proc/<pid>/fd are links out of the bind into every process's files, debugfs, tracefs, securityfs and bpffs show the host kernel's state; drop the bind (bind the files you need from elsewhere)", src, t)
		}
		fs, err := bindFS(src, recursive, subs, op)
		if err != nil {
			return "", -1, refuse(RuleWritableKernelMount, field,
				"the spec binds %s, whose filesystem could not be checked (%v); make the bind read-only or use another source", src, err)
		}
		if fs != "" && !readOnly(m.Options, recursive && len(subs) > 0) {
			how := "ro"
			if recursive {
				how = "rro (ro alone leaves rbind submounts writable)"
			}
			return "", -1, refuse(RuleWritableKernelMount, field,
				"the spec binds %s (%s) writable into the container, which would let the workload reconfigure the host kernel; make it read-only with %s, or drop it (no --privileged)", src, fs, how)
		}
		if isCgroupBind(src, fs, recursive, subs) {
			cgroupMount = m.Destination
			if cgroupBind < 0 {
				cgroupBind = i
			}
		}
		if err := checkSockets(src, fs, field, recursive, subs, op); err != nil {
			return "", -1, err
		}
		if err := checkPropagation(m, field); err != nil {
			return "", -1, err
		}
		if !readOnly(m.Options, recursive && len(subs) > 0) && !isCRISandboxFile(src, op) && !underAny(src, op.WritableBindRoots) {
			return "", -1, refuse(RuleWritableHostPath, field,
				"the spec binds host path %s writable; a writable host path outside the operator's writable_bind_roots (%s) could change the host beneath the boundary; bind it read-only (ro; rro when it has submounts), or have the operator list its directory in writable_bind_roots", src, strings.Join(op.WritableBindRoots, ", "))
		}
	}
	return cgroupMount, cgroupBind, nil
}

func bindKind(m specs.Mount) (bind, recursive bool) {
	recursive = m.Type == "rbind" || slices.Contains(m.Options, "rbind")
	bind = recursive || m.Type == "bind" || slices.Contains(m.Options, "bind")
	return bind, recursive
}

func checkFSMount(m specs.Mount, field string) error {
	switch {
	case slices.Contains(plainTypes, m.Type):
		return nil
	case !slices.Contains(kernelTypes, m.Type):
		return refuse(RuleMountType, field,
			"the spec mounts a %q filesystem at %s, which is not a type containerd's default spec uses; mount it on the host and bind it, or drop it", m.Type, m.Destination)
	case m.Type == "proc" && path.Clean(m.Destination) == "/proc":
		return nil // containerd's own; /proc paths are guarded by maskedPaths/readonlyPaths
	case slices.Contains(exposedTypes, m.Type) && m.Type != "proc":
		return refuse(RuleKernelFSExposed, field,
			"the spec mounts %s at %s, the host kernel's state (read-only or not; no default spec mounts it); drop it (no --privileged)", m.Type, m.Destination)
	case readOnly(m.Options, false):
		return nil
	}
	return refuse(RuleWritableKernelMount, field,
		"the spec mounts %s at %s writable, which would let the workload reconfigure the host kernel; add the ro option, or drop it (no --privileged)", m.Type, m.Destination)
}

// exposedTypes are the kernel filesystems no bind may carry into a
// container, read-only or not (RuleKernelFSExposed); a proc mount goes
// only to /proc (checkFSMount, checkKernelFSDestinations).
var exposedTypes = []string{"proc", "debugfs", "tracefs", "securityfs", "bpf"}

// exposedFS names the exposedTypes filesystem a bind of src carries: src
// under /proc (or, recursive, an ancestor of it), a submount of one of
// those types, or src itself on one (the operator's FSTyper); "" when
// none.
func exposedFS(src string, recursive bool, subs []string, op Operator) string {
	if under(src, "/proc") || (recursive && under("/proc", src)) {
		return "procfs (the host's /proc)"
	}
	for _, t := range subs {
		if slices.Contains(exposedTypes, t) {
			return t + " (mounted beneath " + src + ")"
		}
	}
	if op.FSTyper == nil {
		return ""
	}
	magic, err := op.FSTyper(src)
	if err != nil {
		return "" // bindFS refuses what it cannot type
	}
	if t := kernelMagics[magic]; slices.Contains(exposedTypes, t) {
		return t
	}
	return ""
}

// bindFS names the kernel filesystem a bind source is (by well-known root, then by the
// operator's FSTyper), or "" when it is none. A recursive bind of an ancestor of a
// kernel root carries that root along.
func bindFS(src string, recursive bool, subs []string, op Operator) (string, error) {
	for _, r := range kernelRoots {
		if under(src, r) || (recursive && under(r, src)) {
			return strings.TrimPrefix(r, "/") + " tree", nil
		}
	}
	for _, t := range subs {
		if slices.Contains(kernelTypes, t) {
			return t + " (mounted beneath " + src + ")", nil
		}
	}
	if op.FSTyper == nil {
		return "", nil
	}
	magic, err := op.FSTyper(src)
	if err != nil {
		return "", err
	}
	return kernelMagics[magic], nil
}

func checkRuntimeBind(src, field string, op Operator) error {
	if slices.Contains(socketNames, path.Base(src)) {
		return runtimeRefusal(field, src)
	}
	if isCRISandboxFile(src, op) || isCRIImageVolume(src, op) {
		return nil
	}
	if slices.Contains(op.AllowedRuntimeFiles, src) {
		return nil // the operator vouches for this one file (e.g. BuildKit's trace socket)
	}
	for _, r := range append(slices.Clone(runtimeRoots), op.StateDirs...) {
		r = path.Clean(r)
		if under(src, r) || under(r, src) {
			return runtimeRefusal(field, src)
		}
	}
	return nil
}

func runtimeRefusal(field, src string) error {
	return refuse(RuleRuntimeSocket, field,
		"the spec binds %s, which is or contains a container runtime's socket or state, letting the workload start containers outside its boundary; drop the bind (no -v /run/containerd, no docker.sock)", src)
}

// checkPropagation refuses shared or slave propagation on a bind: a mount
// the host makes later beneath the source (a tmpfs with a socket, a user's
// runtime dir at login) would appear in the container, past every check.
func checkPropagation(m specs.Mount, field string) error {
	for _, o := range m.Options {
		switch o {
		case "shared", "rshared", "slave", "rslave":
			return refuse(RuleMountPropagation, field,
				"the spec binds %s with %s propagation: mounts the host makes beneath it later would reach the container unchecked; use private (no mountPropagation: HostToContainer or Bidirectional)", m.Source, o)
		}
	}
	return nil
}

// privateBinds makes every bind that names no propagation rprivate: runc
// makes the rootfs rslave by default, and a bind then inherits the host's
// mount events beneath its source.
func privateBinds(ms []specs.Mount) {
	for i := range ms {
		if bind, _ := bindKind(ms[i]); bind && !slices.ContainsFunc(ms[i].Options, func(o string) bool { return o == "private" || o == "rprivate" }) {
			ms[i].Options = append(ms[i].Options, "rprivate")
		}
	}
}

// checkSockets refuses a bind whose source is, or holds, a unix socket:
// connect(2) works through a read-only mount, so it would be a channel to
// whatever listens there (systemd, dbus, a runtime), outside the cgroup
// and the table, in any netns. Kernel filesystem trees hold none; the
// operator's writable and readable roots and allowed runtime files are
// vouched for.
func checkSockets(src, fs, field string, recursive bool, subs []string, op Operator) error {
	if op.SocketFinder == nil || fs != "" || underAny(src, op.WritableBindRoots) || underAny(src, op.ReadableBindRoots) {
		return nil
	}
	if recursive && len(subs) > 0 {
		// The scan stays on the source's own filesystem; what an rbind
		// carries from other mounts (a tmpfs holding a socket) it cannot see.
		return refuse(RuleBindSocket, field,
			"the spec binds %s recursively, carrying %d other mount(s) the runtime does not scan for unix sockets; bind it without rbind, bind each mount on its own, or have the operator list it in readable_bind_roots", src, len(subs))
	}
	if isCRISandboxFile(src, op) || isCRIImageVolume(src, op) || slices.Contains(op.AllowedRuntimeFiles, src) {
		return nil
	}
	found, err := op.SocketFinder(src)
	if err != nil {
		return refuse(RuleBindSocket, field,
			"the spec binds %s, which cannot be checked for unix sockets (%v); bind a smaller tree, or have the operator list it in readable_bind_roots", src, err)
	}
	if found != "" {
		return refuse(RuleBindSocket, field,
			"the spec binds %s, which holds the unix socket %s: connecting to it reaches its listener (a host service acts as host root) past the network boundary, even read-only; bind a tree without sockets", src, found)
	}
	return nil
}

// submounts lists what an rbind of src carries along. Without the
// operator's Submounts every recursive bind is assumed to carry some.
func submounts(src string, op Operator) []string {
	if op.Submounts == nil {
		return []string{"unknown"}
	}
	return op.Submounts(src)
}

// readOnly reports whether mount options leave the mount read-only: the last of ro/rw
// wins; for a recursive bind of a tree that has submounts only rro (recursive
// read-only) covers them (recursive is false when the source has none).
func readOnly(opts []string, recursive bool) bool {
	ro, rro := false, false
	for _, o := range opts {
		switch o {
		case "ro":
			ro = true
		case "rw":
			ro, rro = false, false // fail closed: do not rely on rro winning over a later rw
		case "rro":
			rro = true
		case "rrw":
			rro = false
		}
	}
	if recursive {
		return rro
	}
	return ro || rro
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if d != "" && d != "/" && under(p, path.Clean(d)) {
			return true
		}
	}
	return false
}

// CheckRootPath admits a root.path that is not the task's own snapshot (a
// host directory the caller chose, e.g. ctr --rootfs): it must resolve
// (resolved is the result of resolving its symlinks), be read-only, and be
// neither a kernel filesystem tree nor a runtime's socket or state, nor
// contain one.
func CheckRootPath(resolved string, readonly bool, op Operator) error {
	const field = "root.path"
	if !readonly {
		return refuse(RuleRootPath, field,
			"the spec's root %s is a host directory, not the task's snapshot, and is writable: the workload would change host files no gate reads; set root.readonly (ctr --read-only) or run from an image", resolved)
	}
	for _, r := range kernelRoots {
		if under(resolved, r) || under(r, resolved) {
			return refuse(RuleRootPath, field, "the spec's root %s is or contains the %s tree; use a directory of its own", resolved, r)
		}
	}
	if slices.Contains(socketNames, path.Base(resolved)) {
		return runtimeRefusal(field, resolved)
	}
	for _, r := range append(slices.Clone(runtimeRoots), op.StateDirs...) {
		r = path.Clean(r)
		if under(resolved, r) || under(r, resolved) {
			return runtimeRefusal(field, resolved)
		}
	}
	return nil
}

// under reports whether p is dir or inside it (both clean and absolute).
func under(p, dir string) bool { return fsafe.Within(p, dir) }

// MountDestinations lists the spec's mount destinations: runc stubs each in
// the container's upperdir, so the gate excludes them from the diff.
func MountDestinations(s *specs.Spec) []string {
	var out []string
	for _, m := range s.Mounts {
		out = append(out, m.Destination)
	}
	return out
}
