package service

import (
	"fmt"
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/nsfile"
	"github.com/gensee/gensee/spec"
)

// The namespace helpers live in shim/nsfile (shared with the OCI hooks
// adapter); these names keep the call sites of this package.
type nsID = nsfile.ID

var (
	nsIDOf               = nsfile.IDOf
	openNamespace        = nsfile.Open
	ownerOf              = nsfile.OwnerOf
	nsIDOfPath           = nsfile.IDOfPath
	ownedByInitialUserns = nsfile.OwnedByInitialUserns
)

// checkJoinedNetns refuses a netns joined by path unless it is a network
// namespace owned by the initial user namespace, or by the user namespace
// the container itself joins (a Kubernetes pod's, whose netns CRI makes
// inside it): any other owner has a root the capability policy does not
// bind. It returns the namespace's identity, which bind compares with the
// netns the init really joined.
func checkJoinedNetns(path string, u userns) (nsID, *spec.Refusal) {
	f, err := openNamespace(path, unix.CLONE_NEWNET)
	if err != nil {
		return nsID{}, spec.Refuse("netns_path", "linux.namespaces", "join an existing network namespace file (e.g. /var/run/netns/NAME)", "linux.namespaces network path %q: %v", path, err)
	}
	defer f.Close()
	ok, err := ownedByInitialUserns(f)
	if err != nil {
		return nsID{}, refuse("netns_path", "linux.namespaces network path %q: %v", path, err)
	}
	if !ok && u.path != "" {
		owner, oerr := ownerOf(f)
		uf, uerr := openNamespace(u.path, unix.CLONE_NEWUSER)
		if oerr == nil && uerr == nil {
			want, _ := nsIDOf(uf)
			uf.Close()
			ok = owner == want
		}
	}
	if !ok {
		return nsID{}, spec.Refuse("netns_foreign_userns", "linux.namespaces", "join a network namespace created by host root or by the container's user namespace", "linux.namespaces network path %q is owned by a user namespace that is neither the host's nor the container's own, whose root can delete the container's network table", path)
	}
	id, err := nsIDOf(f)
	if err != nil {
		return nsID{}, refuse("netns_path", "linux.namespaces network path %q: %v", path, err)
	}
	return id, nil
}

// checkJoinedUserns refuses a user namespace joined by path unless it sits
// directly below the initial one and was made by host root or by the
// container's own mapped root: a user namespace an unprivileged host user
// made is that user's, who holds every capability in it — over the netns
// it owns too — whatever the container's sets say. containerd's CRI makes
// a pod's user namespace with the effective uid its root maps to (a uid
// from the kubelet's range, above the first 65536 host ids), so that
// owner is accepted when the spec maps container root to it.
func checkJoinedUserns(path string, mappings []specs.LinuxIDMapping) (nsID, *spec.Refusal) {
	f, err := openNamespace(path, unix.CLONE_NEWUSER)
	if err != nil {
		return nsID{}, spec.Refuse("userns_path", "linux.namespaces", "join a user namespace file", "linux.namespaces user path %q: %v", path, err)
	}
	defer f.Close()
	if err := usernsOwnedForContainer(f, mappings); err != nil {
		return nsID{}, spec.Refuse("userns_foreign_owner", "linux.namespaces", "join a user namespace host root made (a pod's)", "linux.namespaces user path %q: %v", path, err)
	}
	id, err := nsIDOf(f)
	if err != nil {
		return nsID{}, refuse("userns_path", "linux.namespaces user path %q: %v", path, err)
	}
	return id, nil
}

// usernsOwnedForContainer is checkJoinedUserns's rule on an open user
// namespace: directly below the initial one, owned by root or by the
// container's mapped root (>= podUIDMin).
func usernsOwnedForContainer(f *os.File, mappings []specs.LinuxIDMapping) error {
	uid, err := unix.IoctlGetUint32(int(f.Fd()), unix.NS_GET_OWNER_UID)
	if err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	pfd, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_PARENT)
	if err != nil {
		return fmt.Errorf("parent: %w", err)
	}
	parent := os.NewFile(uintptr(pfd), "parent userns")
	defer parent.Close()
	got, err := nsIDOf(parent)
	if err != nil {
		return fmt.Errorf("parent: %w", err)
	}
	want, err := nsIDOfPath("/proc/self/ns/user")
	if err != nil || got != want || (uid != 0 && (uid < podUIDMin || uid != mappedRoot(mappings))) {
		return fmt.Errorf("it was made by uid %d, or below another user namespace than the host's: its maker holds every capability there, over the network namespace it owns too", uid)
	}
	return nil
}

// podUIDMin is the lowest host uid a pod's user namespace may be owned by
// (below it live the host's own users).
const podUIDMin = 65536

// mappedRoot is the host uid container root maps to, or 0 when unmapped.
func mappedRoot(ms []specs.LinuxIDMapping) uint32 {
	for _, m := range ms {
		if m.ContainerID == 0 && m.Size > 0 {
			return m.HostID
		}
	}
	return 0
}
