package specpolicy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ctrDefaultSpec is what `ctr run` builds: containerd v2.4.2's default Unix spec plus
// oci.WithDefaultUnixDevices.
func ctrDefaultSpec(t testing.TB, opts ...oci.SpecOpts) *specs.Spec {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), "default")
	opts = append([]oci.SpecOpts{oci.WithDefaultUnixDevices}, opts...)
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "x"}, opts...)
	if err != nil {
		t.Fatalf("generate containerd default spec: %v", err)
	}
	return s
}

// The kubelet's default masked and read-only paths (pkg/securitycontext), which CRI
// applies after emptying containerd's.
var kubeletMasked = []string{
	"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/sys/firmware", "/sys/devices/virtual/powercap",
}
var kubeletReadonly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

const criSandbox = "0123456789abcdef"

// criSandboxSpec follows internal/cri/server/podsandbox sandboxContainerSpec for a pod
// with a private netns and RuntimeDefault seccomp.
func criSandboxSpec(t testing.TB) *specs.Spec {
	s := ctrDefaultSpec(t, oci.WithoutRunMount, oci.WithRootFSReadonly(), oci.WithoutMounts("/dev/shm"),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/var/run/netns/cni-1234"}),
		oci.WithMounts([]specs.Mount{
			{Source: "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/" + criSandbox + "/shm", Destination: "/dev/shm", Type: "bind", Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}},
			{Source: "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/" + criSandbox + "/resolv.conf", Destination: "/etc/resolv.conf", Type: "bind", Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}},
		}),
	)
	s.Linux.Resources.Devices = nil // CRI adds no device rules to the pause container
	s.Process.Rlimits = nil
	s.Process.Args = []string{"/pause"}
	s.Linux.Sysctl = map[string]string{"net.ipv4.ip_unprivileged_port_start": "0", "net.ipv4.ping_group_range": "0 2147483647"}
	s.Process.OOMScoreAdj = intp(-998)
	s.Linux.Seccomp = seccomp.DefaultProfile(s)
	return s
}

// criContainerSpec follows internal/cri/server buildLinuxSpec for an unprivileged
// container on a cgroup v2 host, kubelet defaults, RuntimeDefault seccomp.
func criContainerSpec(t testing.TB) *specs.Spec {
	sb := "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/" + criSandbox
	s := ctrDefaultSpec(t, oci.WithoutRunMount, oci.WithNewPrivileges,
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: "/proc/4242/ns/net"}),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.IPCNamespace, Path: "/proc/4242/ns/ipc"}),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.UTSNamespace, Path: "/proc/4242/ns/uts"}),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.PIDNamespace}),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace}),
		oci.WithoutMounts("/dev/shm"),
		oci.WithMounts([]specs.Mount{
			{Source: "cgroup", Destination: "/sys/fs/cgroup", Type: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
			{Source: sb + "/hosts", Destination: "/etc/hosts", Type: "bind", Options: []string{"rbind", "rprivate", "rw"}},
			{Source: "/var/lib/kubelet/pods/0b6c/etc-hosts", Destination: "/etc/hosts", Type: "bind", Options: []string{"rbind", "rprivate", "rw"}},
			{Source: "/var/lib/kubelet/pods/0b6c/containers/app/1a2b", Destination: "/dev/termination-log", Type: "bind", Options: []string{"rbind", "rprivate", "rw"}},
			{Source: sb + "/hostname", Destination: "/etc/hostname", Type: "bind", Options: []string{"rbind", "rprivate", "rw"}},
			{Source: sb + "/resolv.conf", Destination: "/etc/resolv.conf", Type: "bind", Options: []string{"rbind", "rprivate", "rw"}},
			{Source: "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/" + criSandbox + "/shm", Destination: "/dev/shm", Type: "bind", Options: []string{"rbind", "rprivate", "rw"}},
			{Source: "/var/lib/kubelet/pods/0b6c/volumes/kubernetes.io~projected/kube-api-access-x", Destination: "/var/run/secrets/kubernetes.io/serviceaccount", Type: "bind", Options: []string{"rbind", "rprivate", "ro"}},
		}),
		oci.WithMaskedPaths(kubeletMasked), oci.WithReadonlyPaths(kubeletReadonly),
	)
	s.Process.Rlimits = nil
	s.Process.Capabilities.Ambient = nil
	s.Linux.CgroupsPath = "kubepods-besteffort-pod0b6c.slice:cri-containerd:x"
	s.Linux.Seccomp = seccomp.DefaultProfile(s)
	return s
}

func intp(i int) *int { return &i }

func decodeSpec(data []byte) (*specs.Spec, error) {
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
