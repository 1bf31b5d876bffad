package specpolicy

import (
	"path"
	"slices"
	"strings"
)

// criPlugin is the directory CRI keeps its per-pod files in, under
// containerd's root (hosts, hostname, resolv.conf) and state (shm).
const criPlugin = "io.containerd.grpc.v1.cri"

// taskDir is the directory containerd's v2 shims get their bundles in,
// under its state: <state>/io.containerd.runtime.v2.task/<namespace>/<id>.
const taskDir = "io.containerd.runtime.v2.task"

// StockContainerdRoot and StockContainerdState are containerd's defaults.
const (
	StockContainerdRoot  = "/var/lib/containerd"
	StockContainerdState = "/run/containerd"
)

// CRISandboxDirs returns where CRI keeps its sandbox directories for a
// containerd with root root (the operator's containerd_root; "" for the
// stock one) and state state (StateFromBundle; "" when not known): each
// <dir>/io.containerd.grpc.v1.cri/sandboxes. k3s keeps its under
// /var/lib/rancher/k3s/agent/containerd and /run/k3s/containerd, RKE2 under
// /var/lib/rancher/rke2/agent/containerd and /run/k3s/containerd. With no
// state, the stock one (and its /var/run alias).
func CRISandboxDirs(root, state string) []string {
	if root == "" {
		root = StockContainerdRoot
	}
	states := []string{state}
	if state == "" {
		states = []string{StockContainerdState, "/var" + StockContainerdState}
	}
	var dirs []string
	for _, d := range append([]string{root}, states...) {
		if d == "" || !path.IsAbs(d) || path.Clean(d) != d || d == "/" {
			continue
		}
		d = path.Join(d, criPlugin, "sandboxes")
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// StateFromBundle is containerd's state dir as the task's bundle shows it:
// containerd makes the bundle <state>/io.containerd.runtime.v2.task/<ns>/<id>
// and hands the shim its path (the client does not choose it). "" when the
// bundle is not laid out so, or the state would be the root directory.
func StateFromBundle(bundle, ns, id string) string {
	if !path.IsAbs(bundle) || path.Clean(bundle) != bundle || ns == "" || id == "" || strings.Contains(ns+id, "/") {
		return ""
	}
	state, ok := strings.CutSuffix(bundle, "/"+taskDir+"/"+ns+"/"+id)
	if !ok || state == "" || path.Clean(state) != state {
		return ""
	}
	return state
}

// isCRISandboxFile matches <dir>/<sandbox id>/<file> for one of the
// operator's CRI sandbox dirs (op.CRISandboxDirs; none set: the stock
// root's and state's), the container's own pod sandbox id only (none: no
// file matches) and one of CRI's per-pod files, so a pod cannot bind
// another pod's hosts, resolv.conf or shm, nor anything else there.
func isCRISandboxFile(src string, op Operator) bool {
	if op.SandboxID == "" || strings.Contains(op.SandboxID, "/") || op.SandboxID == "." || op.SandboxID == ".." {
		return false
	}
	dirs := op.CRISandboxDirs
	if len(dirs) == 0 {
		dirs = CRISandboxDirs("", "")
	}
	if path.Clean(src) != src {
		return false
	}
	for _, d := range dirs {
		rest, ok := strings.CutPrefix(src, d+"/"+op.SandboxID+"/")
		if ok && slices.Contains(criSandboxFiles, rest) {
			return true
		}
	}
	return false
}

// isCRIImageVolume matches an image volume of the container's own pod
// (Kubernetes image volumes): CRI mounts the image read-only at
// <state>/io.containerd.grpc.v1.cri/image-volumes/<pod sandbox id>/<image
// id> and binds it, or a directory of it (a subPath, which CRI resolves
// inside the image with os.OpenInRoot), into the container. Only the own
// pod's, and only read-only: the writable-bind rule still applies, since
// this does not exempt it. An image's content holds no unix socket (a
// layer cannot carry one), so the socket scan is skipped for it.
func isCRIImageVolume(src string, op Operator) bool {
	if op.SandboxID == "" || strings.Contains(op.SandboxID, "/") || op.SandboxID == "." || op.SandboxID == ".." || path.Clean(src) != src {
		return false
	}
	dirs := op.CRISandboxDirs
	if len(dirs) == 0 {
		dirs = CRISandboxDirs("", "")
	}
	for _, d := range dirs {
		base, ok := strings.CutSuffix(d, "/sandboxes")
		if !ok {
			continue
		}
		rest, ok := strings.CutPrefix(src, base+"/image-volumes/"+op.SandboxID+"/")
		if ok && rest != "" && rest != "." && rest != ".." && !strings.HasPrefix(rest, "../") {
			return true
		}
	}
	return false
}
