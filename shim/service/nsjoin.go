package service

import (
	"fmt"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// Namespaces joined by path are an allowlist anchored on the pod sandbox.
// Another container's pid namespace would let the workload see its
// processes, take their sockets (pidfd_getfd) and read its rootfs through
// /proc/<pid>/root; its ipc namespace, its shared memory; its netns, its
// loopback, abstract sockets and listening ports, under its table. So:
//
//   - In CRI's k8s.io, a pod's container (CRI's sandbox id set, not the
//     sandbox's own) joins network, ipc, uts, pid and user namespaces only
//     when each is the very namespace its own pod sandbox's init is in
//     (what CRI names, /proc/<sandbox pid>/ns/<type>), compared by nsfs
//     identity, never by path: kubectl debug --target (another
//     container's pid namespace) is refused.
//   - The pod sandbox itself joins only a network and a user namespace by
//     path (CNI's netns, the pod's pinned user namespace), under the owner
//     rules of checkJoinedNetns and checkJoinedUserns.
//   - Everywhere else only a network namespace, and only one no process is
//     in yet (one host root made and pinned: ip netns add); the bind checks
//     again that the init is alone in it.
//
// mount and cgroup namespaces by path are refused before
// (refuseJoinedNamespaces), as is the host's own pid or ipc namespace. Exec
// joins the container's own namespaces: there is nothing to check there.

// joinScope is where a container's namespaces may come from.
type joinScope struct {
	sandboxID string // CRI's sandbox id; "" outside CRI's k8s.io
	sandbox   bool   // the task is its pod's sandbox (pause)
	tasks     string // the containerd namespace's task directory: the sandbox's bundle is tasks/<sandboxID>
}

// scopeOf reads the join scope of task id in containerd namespace ns. The
// sandbox id is read only in CRI's namespace, where only CRI creates
// containers and sets it after the pod's pass-through annotations.
func scopeOf(ns, id, bundle string, a map[string]string) joinScope {
	if ns != CRINamespace {
		return joinScope{}
	}
	sid := a[AnnotationSandboxID]
	return joinScope{sandboxID: sid, sandbox: sid == id, tasks: filepath.Dir(bundle)}
}

// nsIdentity is the kernel seam of the check: namespace identities and
// who is in a network namespace.
type nsIdentity interface {
	// ofPath is the identity of the namespace file at path, which must be
	// a namespace of type t.
	ofPath(path string, t specs.LinuxNamespaceType) (nsID, error)
	// ofSandbox is the identity of every namespace of the types podJoinable
	// lists that the init of the pod sandbox whose bundle is bundle runs in.
	ofSandbox(bundle string) (map[specs.LinuxNamespaceType]nsID, error)
	// occupant is a process (other than except) whose network namespace
	// is id, or 0 when none is.
	occupant(id nsID, except int) (int, error)
}

// podJoinable are the namespace types a pod's container joins from its
// sandbox (containerd's WithPodNamespaces); sandboxJoinable, the ones the
// sandbox itself joins by path.
var (
	podJoinable     = map[specs.LinuxNamespaceType]bool{specs.NetworkNamespace: true, specs.IPCNamespace: true, specs.UTSNamespace: true, specs.PIDNamespace: true, specs.UserNamespace: true}
	sandboxJoinable = map[specs.LinuxNamespaceType]bool{specs.NetworkNamespace: true, specs.UserNamespace: true}
)

// checkJoinPaths applies the allowlist above to every namespace s joins
// by path. It returns whether the netns was admitted as one no process is
// in, which the bind checks again on the init.
func checkJoinPaths(s *specs.Spec, sc joinScope, ids nsIdentity) (alone bool, rf *spec.Refusal) {
	var pod map[specs.LinuxNamespaceType]nsID // the sandbox's, read once
	for _, j := range specpolicy.ReadNamespaces(s).Joined {
		ns := j.LinuxNamespace
		field := fmt.Sprintf("%s %q (%s)", j.Field(), ns.Path, ns.Type)
		switch {
		case sc.sandboxID == "":
			if ns.Type != specs.NetworkNamespace {
				return false, refuse("namespace_path", "%s: outside a Kubernetes pod a container joins only a network namespace by path; another container's %s namespace would let the workload see or reach into it (its processes, their sockets through pidfd_getfd, its rootfs through /proc/<pid>/root); drop the path and let the runtime make the container its own", field, ns.Type)
			}
			if rf := netnsUnoccupied(ns, field, ids); rf != nil {
				return false, rf
			}
			alone = true
		case sc.sandbox:
			if !sandboxJoinable[ns.Type] {
				return false, refuse("namespace_path", "%s: a pod sandbox makes its own %s namespace, it never joins one by path; drop the path", field, ns.Type)
			}
			if ns.Type == specs.NetworkNamespace {
				// CNI's netns, pinned and empty: a sandbox never joins one
				// a process is in (another pod's, a container's).
				if rf := netnsUnoccupied(ns, field, ids); rf != nil {
					return false, rf
				}
				alone = true
			}
		default:
			if !podJoinable[ns.Type] {
				return false, refuse("namespace_path", "%s: a pod's container joins only its sandbox's network, ipc, uts, pid and user namespaces; drop the path", field)
			}
			if pod == nil {
				var err error
				if pod, err = sandboxNamespaces(sc, ids); err != nil {
					return false, refuse("namespace_path", "%s: %v", field, err)
				}
			}
			if err := samePodNamespace(ns, sc.sandboxID, pod[ns.Type], ids); err != nil {
				return false, refuse("namespace_path", "%s: %v", field, err)
			}
		}
	}
	return alone, nil
}

// netnsUnoccupied requires the network namespace ns names to hold no
// process.
func netnsUnoccupied(ns specs.LinuxNamespace, field string, ids nsIdentity) *spec.Refusal {
	id, err := ids.ofPath(ns.Path, ns.Type)
	if err != nil {
		return refuse("namespace_path", "%s: %v; join an existing network namespace file (e.g. /var/run/netns/NAME)", field, err)
	}
	pid, err := ids.occupant(id, 0)
	if err != nil {
		return refuse("netns_in_use", "%s: cannot tell whether another process is in it: %v", field, err)
	}
	if pid != 0 {
		return refuse("netns_in_use", "%s: process %d is already in this network namespace (another container's, a pod's or the host's): the workload would share its loopback, abstract sockets and ports, and send under that container's table; join a network namespace no process is in (ip netns add NAME, then /var/run/netns/NAME), or run with the host's network without a path", field, pid)
	}
	return nil
}

// sandboxNamespaces reads the namespaces of the container's own pod
// sandbox: the sibling task named by CRI's sandbox id.
func sandboxNamespaces(sc joinScope, ids nsIdentity) (map[specs.LinuxNamespaceType]nsID, error) {
	sid := sc.sandboxID
	if strings.ContainsAny(sid, "/\x00") || sid == "." || sid == ".." {
		return nil, fmt.Errorf("the sandbox id %q names no sandbox; a pod's container joins only its own sandbox's namespaces", sid)
	}
	pod, err := ids.ofSandbox(filepath.Join(sc.tasks, sid))
	if err != nil {
		return nil, fmt.Errorf("cannot read the namespaces of the container's pod sandbox %s: %v; a pod's container joins only its own running sandbox's namespaces", sid, err)
	}
	return pod, nil
}

// samePodNamespace requires namespace ns to be want, the one of its type
// the container's own pod sandbox sid runs in.
func samePodNamespace(ns specs.LinuxNamespace, sid string, want nsID, ids nsIdentity) error {
	got, err := ids.ofPath(ns.Path, ns.Type)
	if err != nil {
		return fmt.Errorf("%v; a pod's container joins only its own sandbox's namespaces", err)
	}
	if want == (nsID{}) || got != want {
		return fmt.Errorf("not the %s namespace of the container's own pod sandbox %s (another container's, another pod's or the host's): a pod's container joins only its sandbox's namespaces, never another container's (kubectl debug --target included); drop it or share the pod's (shareProcessNamespace)", ns.Type, sid)
	}
	return nil
}
