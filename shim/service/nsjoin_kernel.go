package service

import (
	"errors"
	"fmt"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/nsfile"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/shim/record"
)

// nsKinds maps a spec's namespace type to its /proc/<pid>/ns file and
// its CLONE_NEW* type.
var nsKinds = map[specs.LinuxNamespaceType]struct {
	file   string
	nstype int
}{
	specs.NetworkNamespace: {"net", unix.CLONE_NEWNET},
	specs.IPCNamespace:     {"ipc", unix.CLONE_NEWIPC},
	specs.UTSNamespace:     {"uts", unix.CLONE_NEWUTS},
	specs.PIDNamespace:     {"pid", unix.CLONE_NEWPID},
	specs.UserNamespace:    {"user", unix.CLONE_NEWUSER},
	specs.MountNamespace:   {"mnt", unix.CLONE_NEWNS},
	specs.CgroupNamespace:  {"cgroup", unix.CLONE_NEWCGROUP},
	specs.TimeNamespace:    {"time", unix.CLONE_NEWTIME},
}

// kernelNS is nsIdentity on the running kernel.
type kernelNS struct{}

func (kernelNS) ofPath(path string, t specs.LinuxNamespaceType) (nsID, error) {
	k, ok := nsKinds[t]
	if !ok {
		return nsID{}, fmt.Errorf("unknown namespace type %q", t)
	}
	f, err := openNamespace(path, k.nstype)
	if err != nil {
		return nsID{}, err
	}
	defer f.Close()
	return nsIDOf(f)
}

// ofSandbox reads the sandbox's init from its bundle marker (this shim's
// own record, written once the sandbox was admitted and bound: its pid
// and start time), holds it by a pidfd whose start time is re-read after
// the open (a reused pid names another process), opens its namespaces and
// checks through the pidfd that the init is still alive: the namespaces
// opened were the sandbox init's. The sandbox's spec must say it is CRI's
// sandbox and its own.
func (kernelNS) ofSandbox(bundle string) (map[specs.LinuxNamespaceType]nsID, error) {
	s, err := observe.ReadSpec(bundle)
	if err != nil {
		return nil, fmt.Errorf("read the sandbox's spec: %w", err)
	}
	if s.Annotations[annotationContainerType] != containerTypeSandbox || s.Annotations[AnnotationSandboxID] != filepath.Base(bundle) {
		return nil, errors.New("that task is not a pod sandbox")
	}
	m, found, err := record.ReadBundleMark(bundle)
	if err != nil {
		return nil, fmt.Errorf("read the sandbox's marker: %w", err)
	}
	if !found || m.InitPID <= 0 || m.StartTime == 0 {
		return nil, errors.New("it is not a running task of this runtime (its bundle has no marker naming its init)")
	}
	fd, err := unix.PidfdOpen(m.InitPID, 0)
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's init %d: %w", m.InitPID, err)
	}
	defer unix.Close(fd)
	if st, err := cgroup.ReadStat(m.InitPID); err != nil || st.Start != m.StartTime {
		return nil, fmt.Errorf("the sandbox's init %d has exited", m.InitPID)
	}
	out := make(map[specs.LinuxNamespaceType]nsID, len(podJoinable))
	for t := range podJoinable {
		k := nsKinds[t]
		f, err := openNamespace(fmt.Sprintf("/proc/%d/ns/%s", m.InitPID, k.file), k.nstype)
		if err != nil {
			return nil, err
		}
		id, err := nsIDOf(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		out[t] = id
	}
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != nil {
		return nil, fmt.Errorf("the sandbox's init %d exited while its namespaces were read: %w", m.InitPID, err)
	}
	return out, nil
}

// occupant is nsfile.Occupant.
func (kernelNS) occupant(id nsID, except int) (int, error) { return nsfile.Occupant(id, except) }

// CRI's container-type annotation and its sandbox value.
const (
	annotationContainerType = "io.kubernetes.cri.container-type"
	containerTypeSandbox    = "sandbox"
)
