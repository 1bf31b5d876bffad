package service

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/record"
)

// fakeNS is nsIdentity over tables: namespace files by path, the
// sandboxes' namespaces by bundle, and the occupied network namespaces.
type fakeNS struct {
	paths     map[string]nsID
	sandboxes map[string]map[specs.LinuxNamespaceType]nsID
	occupied  map[nsID]int
	asked     []string // the sandbox bundles looked up
}

func (f *fakeNS) ofPath(path string, _ specs.LinuxNamespaceType) (nsID, error) {
	id, ok := f.paths[path]
	if !ok {
		return nsID{}, errors.New("open namespace " + path + ": no such file or directory")
	}
	return id, nil
}

func (f *fakeNS) ofSandbox(bundle string) (map[specs.LinuxNamespaceType]nsID, error) {
	f.asked = append(f.asked, bundle)
	sb, ok := f.sandboxes[bundle]
	if !ok {
		return nil, errors.New("it is not a running task of this runtime")
	}
	return sb, nil
}

func (f *fakeNS) occupant(id nsID, except int) (int, error) {
	if pid := f.occupied[id]; pid != except {
		return pid, nil
	}
	return 0, nil
}

const tasksDir = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"

// A pod "sb" whose sandbox init runs in namespaces 1..5; a victim
// container in 11..15; a pinned empty netns 20; the host's netns 30 (the
// shim is in it).
func podFake() *fakeNS {
	ino := func(n uint64) nsID { return nsID{Dev: 4, Ino: n} }
	sb := map[specs.LinuxNamespaceType]nsID{
		specs.NetworkNamespace: ino(1), specs.IPCNamespace: ino(2), specs.UTSNamespace: ino(3),
		specs.PIDNamespace: ino(4), specs.UserNamespace: ino(5),
	}
	return &fakeNS{
		paths: map[string]nsID{
			"/proc/100/ns/net": ino(1), "/proc/100/ns/ipc": ino(2), "/proc/100/ns/uts": ino(3),
			"/proc/100/ns/pid": ino(4), "/proc/100/ns/user": ino(5),
			"/proc/200/ns/net": ino(11), "/proc/200/ns/ipc": ino(12), "/proc/200/ns/uts": ino(13),
			"/proc/200/ns/pid": ino(14), "/proc/200/ns/user": ino(15), "/proc/200/ns/time": ino(16),
			"/var/run/netns/empty": ino(20), "/var/run/netns/cni-1": ino(1), "/proc/1/ns/net": ino(30),
		},
		sandboxes: map[string]map[specs.LinuxNamespaceType]nsID{tasksDir + "/sb": sb},
		occupied:  map[nsID]int{ino(1): 100, ino(11): 200, ino(30): 1},
	}
}

func withPaths(paths map[specs.LinuxNamespaceType]string) *specs.Spec {
	s := &specs.Spec{Linux: &specs.Linux{}}
	for _, t := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.NetworkNamespace, specs.IPCNamespace,
		specs.UTSNamespace, specs.MountNamespace, specs.UserNamespace, specs.TimeNamespace} {
		if p, ok := paths[t]; ok {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: t, Path: p})
		} else if t != specs.UserNamespace && t != specs.TimeNamespace {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: t})
		}
	}
	return s
}

func TestCheckJoinPaths(t *testing.T) {
	outside := joinScope{}
	pod := joinScope{sandboxID: "sb", tasks: tasksDir}
	sandbox := joinScope{sandboxID: "sb", sandbox: true, tasks: tasksDir}
	podNS := map[specs.LinuxNamespaceType]string{
		specs.NetworkNamespace: "/proc/100/ns/net", specs.IPCNamespace: "/proc/100/ns/ipc",
		specs.UTSNamespace: "/proc/100/ns/uts", specs.PIDNamespace: "/proc/100/ns/pid",
	}
	for _, tc := range []struct {
		name  string
		scope joinScope
		paths map[specs.LinuxNamespaceType]string
		rule  string // "" admitted
		alone bool
		field string // in the refusal
	}{
		{name: "no paths", scope: outside},
		{name: "outside CRI: an empty pinned netns", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/var/run/netns/empty"}, alone: true},
		{name: "outside CRI: another container's pid namespace", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.PIDNamespace: "/proc/200/ns/pid"}, rule: "namespace_path", field: "linux.namespaces[0].path"},
		{name: "outside CRI: its ipc namespace", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.IPCNamespace: "/proc/200/ns/ipc"}, rule: "namespace_path", field: "linux.namespaces[2].path"},
		{name: "outside CRI: its uts namespace", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.UTSNamespace: "/proc/200/ns/uts"}, rule: "namespace_path", field: "linux.namespaces[3].path"},
		{name: "outside CRI: its time namespace", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.TimeNamespace: "/proc/200/ns/time"}, rule: "namespace_path"},
		{name: "outside CRI: its netns", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/proc/200/ns/net"}, rule: "netns_in_use", field: "process 200"},
		{name: "outside CRI: a pod's pinned netns", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/var/run/netns/cni-1"}, rule: "netns_in_use"},
		{name: "outside CRI: the host's netns by path", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/proc/1/ns/net"}, rule: "netns_in_use"},
		{name: "outside CRI: no namespace file", scope: outside, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/tmp/x"}, rule: "namespace_path"},
		{name: "pod: its sandbox's net, ipc, uts, pid", scope: pod, paths: podNS},
		{name: "pod: and user", scope: pod, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/proc/100/ns/net", specs.UserNamespace: "/proc/100/ns/user"}},
		{name: "pod: the sandbox's netns by its pinned path", scope: pod, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/var/run/netns/cni-1"}},
		{name: "pod: another container's pid namespace (kubectl debug --target)", scope: pod, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/proc/100/ns/net", specs.PIDNamespace: "/proc/200/ns/pid"}, rule: "namespace_path", field: "linux.namespaces[0].path \"/proc/200/ns/pid\" (pid)"},
		{name: "pod: another container's netns", scope: pod, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/proc/200/ns/net"}, rule: "namespace_path"},
		{name: "pod: another's user namespace", scope: pod, paths: map[specs.LinuxNamespaceType]string{specs.UserNamespace: "/proc/200/ns/user"}, rule: "namespace_path"},
		{name: "pod: a time namespace", scope: pod, paths: map[specs.LinuxNamespaceType]string{specs.TimeNamespace: "/proc/100/ns/time"}, rule: "namespace_path"},
		{name: "pod: an empty pinned netns is not the sandbox's", scope: pod, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/var/run/netns/empty"}, rule: "namespace_path"},
		{name: "pod: a sandbox that is not running", scope: joinScope{sandboxID: "gone", tasks: tasksDir}, paths: podNS, rule: "namespace_path", field: "pod sandbox gone"},
		{name: "pod: a sandbox id that climbs", scope: joinScope{sandboxID: "../other/sb", tasks: tasksDir}, paths: podNS, rule: "namespace_path"},
		{name: "pod: a sandbox id ..", scope: joinScope{sandboxID: "..", tasks: tasksDir}, paths: podNS, rule: "namespace_path"},
		{name: "sandbox: CNI's netns and the pod's user namespace", scope: sandbox, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/var/run/netns/empty", specs.UserNamespace: "/var/lib/containerd/pinned/user"}, alone: true},
		{name: "sandbox: a netns a process is in (another pod's, a container's)", scope: sandbox, paths: map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "/proc/200/ns/net"}, rule: "netns_in_use", field: "process 200"},
		{name: "sandbox: a pid namespace by path", scope: sandbox, paths: map[specs.LinuxNamespaceType]string{specs.PIDNamespace: "/proc/200/ns/pid"}, rule: "namespace_path"},
		{name: "sandbox: an ipc namespace by path", scope: sandbox, paths: map[specs.LinuxNamespaceType]string{specs.IPCNamespace: "/proc/200/ns/ipc"}, rule: "namespace_path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := podFake()
			alone, rf := checkJoinPaths(withPaths(tc.paths), tc.scope, f)
			if tc.rule == "" {
				if rf != nil || alone != tc.alone {
					t.Fatalf("got alone=%v %v, want admitted, alone=%v", alone, rf, tc.alone)
				}
				return
			}
			if rf == nil || rf.Reason != tc.rule {
				t.Fatalf("got %v, want refusal %s", rf, tc.rule)
			}
			if !strings.Contains(rf.Message, tc.field) || !strings.HasPrefix(rf.Field, "linux.namespaces[") || !strings.HasPrefix(rf.Message, rf.Field+" ") {
				t.Fatalf("refusal %q (field %q) does not name %q", rf.Message, rf.Field, tc.field)
			}
		})
	}
}

// The sandbox is looked up as the sibling of the container's bundle, and
// only in CRI's namespace.
func TestScopeOf(t *testing.T) {
	a := map[string]string{AnnotationSandboxID: "sb"}
	if sc := scopeOf("default", "c1", tasksDir+"/c1", a); sc != (joinScope{}) {
		t.Fatalf("outside k8s.io the sandbox id is never read: %+v", sc)
	}
	sc := scopeOf(CRINamespace, "c1", tasksDir+"/c1", a)
	if sc.sandboxID != "sb" || sc.sandbox || sc.tasks != tasksDir {
		t.Fatalf("pod container: %+v", sc)
	}
	if sc := scopeOf(CRINamespace, "sb", tasksDir+"/sb", a); !sc.sandbox {
		t.Fatalf("the sandbox itself: %+v", sc)
	}
	if sc := scopeOf(CRINamespace, "x", tasksDir+"/x", nil); sc.sandboxID != "" {
		t.Fatalf("k8s.io without a sandbox id: %+v (the outside rules apply)", sc)
	}
	f := podFake()
	if _, err := checkJoinPaths(withPaths(map[specs.LinuxNamespaceType]string{specs.PIDNamespace: "/proc/100/ns/pid"}), sc, f); err != nil {
		t.Fatal(err)
	}
	if len(f.asked) != 1 || f.asked[0] != filepath.Join(tasksDir, "sb") {
		t.Fatalf("sandbox bundles looked up: %v", f.asked)
	}
}

// kernelNS on this process: its own netns has it as an occupant, and a
// sandbox bundle without a marker names no sandbox.
func TestKernelNS(t *testing.T) {
	k := kernelNS{}
	id, err := k.ofPath("/proc/self/ns/net", specs.NetworkNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := k.occupant(id, 0); err != nil || pid == 0 {
		t.Fatalf("own netns: occupant %d %v, want a process", pid, err)
	}
	if _, err := k.ofPath("/proc/self/ns/net", specs.PIDNamespace); err == nil {
		t.Fatal("a netns file admitted as a pid namespace")
	}
	if _, err := k.ofPath("/etc/hostname", specs.NetworkNamespace); err == nil {
		t.Fatal("a regular file admitted as a namespace")
	}
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	sb := filepath.Join(dir, "sb")
	must(os.Mkdir(sb, 0o700))
	must(os.WriteFile(filepath.Join(sb, "config.json"), []byte(`{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-id":"sb"}}`), 0o600))
	if _, err := k.ofSandbox(sb); err == nil || !strings.Contains(err.Error(), "marker") {
		t.Fatalf("a sandbox without a marker: %v", err)
	}
	// This process as the sandbox's init: its marker's pid and start time.
	st, err := cgroup.ReadStat(os.Getpid())
	must(err)
	mark := func(start uint64) {
		b, err := json.Marshal(record.BundleMark{InitPID: os.Getpid(), StartTime: start})
		must(err)
		must(os.WriteFile(filepath.Join(sb, record.BundleMarker), b, 0o600))
	}
	mark(st.Start)
	if got, err := k.ofSandbox(sb); err != nil || got[specs.NetworkNamespace] != id || len(got) != len(podJoinable) {
		t.Fatalf("the sandbox's namespaces: %v %v, want its netns %v among %d", got, err, id, len(podJoinable))
	}
	mark(st.Start + 1) // the pid now names another process than the marker's
	if _, err := k.ofSandbox(sb); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("a reused pid: %v", err)
	}
	must(os.WriteFile(filepath.Join(sb, "config.json"), []byte(`{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.sandbox-id":"sb"}}`), 0o600))
	if _, err := k.ofSandbox(sb); err == nil || !strings.Contains(err.Error(), "not a pod sandbox") {
		t.Fatalf("a container named as the sandbox: %v", err)
	}
}
