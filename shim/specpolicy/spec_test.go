package specpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

func clone(t testing.TB, s *specs.Spec) *specs.Spec {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var c specs.Spec
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// stripNarrowing undoes what admission may change, to compare with the original.
func stripNarrowing(s *specs.Spec) {
	if s.Process != nil && s.Process.Capabilities != nil {
		dropNetRaw(s.Process)
	}
	if s.Linux != nil {
		s.Linux.Seccomp = nil
	}
	privateBinds(s.Mounts) // idempotent: the original gains what admission adds
}

func TestDefaultSpecsAdmitted(t *testing.T) {
	for name, mk := range map[string]func(testing.TB) *specs.Spec{
		"ctr":           func(t testing.TB) *specs.Spec { return ctrDefaultSpec(t) },
		"cri_sandbox":   criSandboxSpec,
		"cri_container": criContainerSpec,
	} {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			orig := clone(t, s)
			// The floor: a shim under a systemd containerd (OOMScoreAdjust=-999)
			// runs at -998, the pause container's.
			res, err := CheckSpec(s, Grants{}, Operator{WritableBindRoots: []string{"/var/lib/kubelet/pods"}, SandboxID: criSandbox, OOMScoreAdjFloor: -998})
			if err != nil {
				t.Fatalf("default spec refused: %v", err)
			}
			want := []string{"CAP_NET_RAW (bounding)", "CAP_NET_RAW (effective)", "CAP_NET_RAW (permitted)"}
			if !reflect.DeepEqual(res.CapabilitiesRemoved, want) {
				t.Errorf("removed %v, want %v", res.CapabilitiesRemoved, want)
			}
			if s.Linux.Seccomp == nil {
				t.Fatal("no seccomp profile after admission")
			}
			got := clone(t, s)
			stripNarrowing(got)
			stripNarrowing(orig)
			if !reflect.DeepEqual(got, orig) {
				t.Error("admission changed more than CAP_NET_RAW and seccomp")
			}
		})
	}
}

func TestCheckSpecRefusals(t *testing.T) {
	u := func(v int64) *int64 { return &v }
	cases := []struct {
		name   string
		mutate func(*specs.Spec)
		g      Grants
		op     Operator
		rule   string
		field  string
	}{
		{"privileged", func(s *specs.Spec) {
			_ = oci.WithPrivileged(context.TODO(), nil, nil, s)
		}, Grants{}, Operator{}, RuleRefusedCapability, "process.capabilities.bounding[2]"},
		{"cap_add_sys_ptrace", func(s *specs.Spec) { addCaps(s.Process.Capabilities, "CAP_SYS_PTRACE") },
			Grants{}, Operator{}, RuleRefusedCapability, "process.capabilities.bounding[14]"},
		{"sys_ptrace_even_granted", func(s *specs.Spec) { addCaps(s.Process.Capabilities, "CAP_SYS_PTRACE") },
			Grants{Capabilities: []string{"CAP_SYS_PTRACE"}}, Operator{}, RuleRefusedCapability, "capabilities[0]"},
		{"ambient_net_admin", func(s *specs.Spec) { s.Process.Capabilities.Ambient = []string{"CAP_NET_ADMIN"} },
			Grants{}, Operator{}, RuleRefusedCapability, "process.capabilities.ambient[0]"},
		{"sys_nice_not_granted", func(s *specs.Spec) {
			s.Process.Capabilities.Permitted = append(s.Process.Capabilities.Permitted, "CAP_SYS_NICE")
		},
			Grants{}, Operator{}, RuleCapabilityNotGrant, "process.capabilities.permitted[14]"},
		{"unknown_cap", func(s *specs.Spec) { s.Process.Capabilities.Inheritable = []string{"CAP_FLY"} },
			Grants{}, Operator{}, RuleUnknownCapability, "process.capabilities.inheritable[0]"},
		{"lower_case_cap", func(s *specs.Spec) { s.Process.Capabilities.Effective[0] = "cap_chown" },
			Grants{}, Operator{}, RuleUnknownCapability, "process.capabilities.effective[0]"},
		{"hook_not_allowed", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{CreateRuntime: []specs.Hook{{Path: "/usr/bin/nvidia-hook"}}}
		}, Grants{}, Operator{HookAllowlist: []string{"/usr/bin/ok"}}, RuleSpecHook, "hooks.createRuntime[0]"},
		{"hook_unclean_path", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{Poststop: []specs.Hook{{Path: "/usr/bin/../bin/ok"}}}
		}, Grants{}, Operator{HookAllowlist: []string{"/usr/bin/ok"}}, RuleSpecHook, "hooks.poststop[0]"},
		{"extra_device", func(s *specs.Spec) {
			s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/kmsg", Type: "c", Major: 1, Minor: 11}}
		}, Grants{}, Operator{}, RuleDevice, "linux.devices[0]"},
		{"default_path_other_numbers", func(s *specs.Spec) {
			s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/null", Type: "b", Major: 8, Minor: 0}}
		}, Grants{}, Operator{}, RuleDevice, "linux.devices[0]"},
		{"device_cgroup_all", func(s *specs.Spec) {
			_ = oci.WithAllDevicesAllowed(context.TODO(), nil, nil, s)
		}, Grants{}, Operator{}, RuleDevice, "linux.resources.devices[0]"},
		{"device_cgroup_block", func(s *specs.Spec) {
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "b", Major: u(8), Minor: u(0), Access: "rw"})
		}, Grants{}, Operator{}, RuleDevice, "linux.resources.devices[10]"},
		{"device_cgroup_wildcard_minor", func(s *specs.Spec) {
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: u(1), Access: "rwm"})
		}, Grants{}, Operator{}, RuleDevice, "linux.resources.devices[10]"},
		{"sysfs_rw", func(s *specs.Spec) { _ = oci.WithWriteableSysfs(context.TODO(), nil, nil, s) },
			Grants{}, Operator{}, RuleWritableKernelMount, "mounts[5]"},
		{"cgroup_rw", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup2", Source: "cgroup", Options: []string{"ro", "rw"}})
		}, Grants{}, Operator{}, RuleWritableKernelMount, "mounts[7]"},
		{"proc_elsewhere_rw", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/host-proc", Type: "proc", Source: "proc"})
		}, Grants{}, Operator{}, RuleWritableKernelMount, "mounts[7]"},
		{"debugfs_rw", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/d", Type: "debugfs", Source: "debugfs"})
		}, Grants{}, Operator{}, RuleKernelFSExposed, "mounts[7]"},
		{"debugfs_ro", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/d", Type: "debugfs", Source: "debugfs", Options: []string{"ro"}})
		}, Grants{}, Operator{}, RuleKernelFSExposed, "mounts[7]"},
		{"tracefs_bpf_securityfs_ro", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/t", Type: "tracefs", Source: "tracefs", Options: []string{"ro"}})
		}, Grants{}, Operator{}, RuleKernelFSExposed, "mounts[7]"},
		{"bind_proc_ro", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/hp", Type: "bind", Source: "/proc", Options: []string{"rbind", "ro"}})
		}, Grants{}, Operator{}, RuleKernelFSExposed, "mounts[7]"},
		{"bind_proc_pid_rro", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/hp", Type: "bind", Source: "/proc/1", Options: []string{"bind", "rro"}})
		}, Grants{}, Operator{}, RuleKernelFSExposed, "mounts[7]"},
		{"rbind_root_rro", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/host", Type: "bind", Source: "/", Options: []string{"rbind", "rro"}})
		}, Grants{}, Operator{}, RuleRuntimeSocket, "mounts[7]"},
		{"bind_sys_kernel_debug", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/d", Type: "bind", Source: "/sys/kernel/debug", Options: []string{"rbind", "rw"}})
		}, Grants{}, Operator{}, RuleWritableKernelMount, "mounts[7]"},
		{"rbind_sys_ro_not_recursive", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/host-sys", Type: "bind", Source: "/sys", Options: []string{"rbind", "ro"}})
		}, Grants{}, Operator{}, RuleWritableKernelMount, "mounts[7]"},
		{"bind_cgroup_elsewhere_by_fstype", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/mnt/cg", Options: []string{"bind"}})
		}, Grants{}, Operator{FSTyper: func(string) (int64, error) { return unix.CGROUP2_SUPER_MAGIC, nil }}, RuleWritableKernelMount, "mounts[7]"},
		{"bind_fstype_error", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/x", Type: "bind", Source: "/mnt/x", Options: []string{"bind"}})
		}, Grants{}, Operator{FSTyper: func(string) (int64, error) { return 0, errors.New("ENOENT") }}, RuleWritableKernelMount, "mounts[7]"},
		{"ext4_mount", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/disk", Type: "ext4", Source: "/dev/sda1"})
		}, Grants{}, Operator{}, RuleMountType, "mounts[7]"},
		{"relative_escape", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/x", Type: "bind", Source: "../../run", Options: []string{"rbind"}})
		}, Grants{}, Operator{}, RuleMountType, "mounts[7]"},
		{"containerd_socket_dir", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/run/containerd", Type: "bind", Source: "/run/containerd", Options: []string{"rbind", "ro"}})
		}, Grants{}, Operator{}, RuleRuntimeSocket, "mounts[7]"},
		{"docker_sock_anywhere", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/s", Type: "bind", Source: "/srv/x/docker.sock", Options: []string{"bind"}})
		}, Grants{}, Operator{}, RuleRuntimeSocket, "mounts[7]"},
		{"ancestor_of_socket", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/host-run", Type: "bind", Source: "/var/run", Options: []string{"rbind", "ro"}})
		}, Grants{}, Operator{}, RuleRuntimeSocket, "mounts[7]"},
		{"operator_state_dir", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/st", Type: "bind", Source: "/srv/gensee/state/x", Options: []string{"bind"}})
		}, Grants{}, Operator{StateDirs: []string{"/srv/gensee/state"}}, RuleRuntimeSocket, "mounts[7]"},
		{"cri_lookalike_not_sandbox_file", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/x", Type: "bind", Source: "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/id/x/hosts", Options: []string{"bind"}})
		}, Grants{}, Operator{}, RuleRuntimeSocket, "mounts[7]"},
		{"unmasked_proc", func(s *specs.Spec) { s.Linux.MaskedPaths = nil },
			Grants{}, Operator{}, RuleUnmaskedProc, "linux.maskedPaths"},
		{"missing_readonly", func(s *specs.Spec) { s.Linux.ReadonlyPaths = s.Linux.ReadonlyPaths[1:] },
			Grants{}, Operator{}, RuleUnmaskedProc, "linux.readonlyPaths"},
		{"host_cgroupns_with_cgroup_mount", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"ro"}})
		}, Grants{}, Operator{}, RuleHostCgroupns, "linux.namespaces"},
		{"host_cgroupns_with_cgroup_bind", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/sys/fs/cgroup/unified", Options: []string{"bind", "ro"}})
		}, Grants{}, Operator{}, RuleHostCgroupns, "linux.namespaces"},
		{"cgroup_bind_without_nsdelegate", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/sys/fs/cgroup/unified", Options: []string{"bind", "ro"}})
		}, Grants{}, Operator{}, RuleCgroupBind, "mounts[7]"},
		{"rbind_carrying_cgroup", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/host-sys", Type: "bind", Source: "/sys", Options: []string{"rbind", "rro"}})
		}, Grants{}, Operator{}, RuleCgroupBind, "mounts[7]"},
		{"cgroup_bind_userns_maps_host_root", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace}, specs.LinuxNamespace{Type: specs.UserNamespace})
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 0, Size: 65536}}
			s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 0, Size: 65536}}
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/sys/fs/cgroup/unified", Options: []string{"bind", "ro"}})
		}, Grants{}, Operator{}, RuleCgroupBind, "mounts[7]"},
		{"cgroup2_mounted_elsewhere", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/srv/cg", Options: []string{"bind", "ro"}})
		}, Grants{}, Operator{FSTyper: func(string) (int64, error) { return unix.CGROUP2_SUPER_MAGIC, nil }}, RuleCgroupBind, "mounts[7]"},
		{"cgroup_bind_clone3_eperm", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/sys/fs/cgroup/unified", Options: []string{"bind", "ro"}})
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: []specs.Arch{specs.ArchX86_64},
				Syscalls: []specs.LinuxSyscall{{Names: []string{"clone3"}, Action: specs.ActErrno}}}
		}, Grants{}, Operator{}, RuleCgroupBind, "mounts[7]"},
		{"host_pid", func(s *specs.Spec) { dropNS(s, specs.PIDNamespace) },
			Grants{}, Operator{}, RuleHostPID, "linux.namespaces"},
		{"host_ipc", func(s *specs.Spec) { dropNS(s, specs.IPCNamespace) },
			Grants{}, Operator{}, RuleHostIPC, "linux.namespaces"},
		{"sysctl_kernel", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"kernel.core_pattern": "|/x"} },
			Grants{}, Operator{}, RuleSysctl, `linux.sysctl["kernel.core_pattern"]`},
		{"sysctl_bpf_jit", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"net.core.bpf_jit_enable": "0"} },
			Grants{}, Operator{}, RuleSysctl, `linux.sysctl["net.core.bpf_jit_enable"]`},
		{"sysctl_conntrack", func(s *specs.Spec) {
			s.Linux.Sysctl = map[string]string{"net.netfilter.nf_conntrack_tcp_loose": "1"}
		}, Grants{}, Operator{}, RuleSysctl, `linux.sysctl["net.netfilter.nf_conntrack_tcp_loose"]`},
		{"sysctl_traversal", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"net.././kernel.core_pattern": "x"} },
			Grants{}, Operator{}, RuleSysctl, `linux.sysctl["net.././kernel.core_pattern"]`},
		{"sysctl_net_on_host_netns", func(s *specs.Spec) {
			dropNS(s, specs.NetworkNamespace)
			s.Linux.Sysctl = map[string]string{"net.ipv4.ip_forward": "1"}
		}, Grants{}, Operator{}, RuleSysctl, `linux.sysctl["net.ipv4.ip_forward"]`},
		{"seccomp_listener", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, ListenerPath: "/run/agent.sock"}
		}, Grants{}, Operator{}, RuleSeccompProfile, "linux.seccomp.listenerPath"},
		{"seccomp_notify_rule", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{{Names: []string{"mount"}, Action: specs.ActNotify}}}
		}, Grants{}, Operator{}, RuleSeccompProfile, "linux.seccomp.syscalls[0]"},
		{"seccomp_unknown_flag", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Flags: []specs.LinuxSeccompFlag{"SECCOMP_FILTER_FLAG_NEW"}}
		}, Grants{}, Operator{}, RuleSeccompProfile, "linux.seccomp.flags[0]"},
		{"seccomp_socket_type_condition", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 1, Value: 1, Op: specs.OpEqualTo}}}}}
		}, Grants{}, Operator{}, RuleSeccompProfile, "linux.seccomp.syscalls[0]"},
		{"seccomp_overlapping_socket_rules", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"socket"}, Action: specs.ActAllow},
				{Names: []string{"socket"}, Action: specs.ActKillProcess, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 2, Op: specs.OpEqualTo}}},
			}}
		}, Grants{}, Operator{}, RuleSeccompProfile, "linux.seccomp.syscalls[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ctrDefaultSpec(t)
			tc.mutate(s)
			before := clone(t, s)
			_, err := CheckSpec(s, tc.g, tc.op)
			var r *spec.Refusal
			if !errors.As(err, &r) {
				t.Fatalf("want refusal %s, got %v", tc.rule, err)
			}
			if r.Reason != tc.rule || r.Field != tc.field {
				t.Fatalf("got %s at %s (%s), want %s at %s", r.Reason, r.Field, r.Message, tc.rule, tc.field)
			}
			if r.Text() != r.Reason+": "+r.Message || !strings.HasPrefix(r.Message, r.Field+": ") || r.Message == r.Field+": " {
				t.Errorf("bad message %q", r.Error())
			}
			if !reflect.DeepEqual(before, clone(t, s)) {
				t.Error("a refused spec was modified")
			}
		})
	}
}

// TestSeccompRefusesClone3: only a profile that answers every clone3 with
// ENOSYS counts; libc falls back to clone(2) then.
func TestSeccompRefusesClone3(t *testing.T) {
	enosys, eperm := uint(unix.ENOSYS), uint(unix.EPERM)
	rule := func(a specs.LinuxSeccompAction, ret *uint, args ...specs.LinuxSeccompArg) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: []string{"clone", "clone3"}, Action: a, ErrnoRet: ret, Args: args}
	}
	for _, tc := range []struct {
		name string
		p    *specs.LinuxSeccomp
		want bool
	}{
		{"none", nil, false},
		{"allow_all", &specs.LinuxSeccomp{DefaultAction: specs.ActAllow}, false},
		{"rule_enosys", &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{rule(specs.ActErrno, &enosys)}}, true},
		{"rule_eperm", &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{rule(specs.ActErrno, &eperm)}}, false},
		{"rule_errno_default", &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{rule(specs.ActErrno, nil)}}, false},
		{"rule_conditional", &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
			rule(specs.ActErrno, &enosys, specs.LinuxSeccompArg{Index: 1, Value: 88, Op: specs.OpEqualTo})}}, false},
		{"two_rules", &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
			rule(specs.ActErrno, &enosys), rule(specs.ActAllow, nil)}}, false},
		{"default_enosys", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: &enosys}, true},
		{"default_enosys_rule_allows", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: &enosys,
			Syscalls: []specs.LinuxSyscall{rule(specs.ActAllow, nil)}}, false},
	} {
		if got := SeccompRefusesClone3(tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func dropNS(s *specs.Spec, typ specs.LinuxNamespaceType) {
	s.Linux.Namespaces = slices.DeleteFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == typ })
}

func TestAdmittedVariants(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*specs.Spec)
		g      Grants
		op     Operator
		notes  []string
	}{
		{"granted_sys_nice", func(s *specs.Spec) { addCaps(s.Process.Capabilities, "CAP_SYS_NICE") },
			Grants{Capabilities: []string{"CAP_SYS_NICE"}}, Operator{}, nil},
		{"allowlisted_hook", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{CreateRuntime: []specs.Hook{{Path: "/usr/bin/ok"}}}
		}, Grants{}, Operator{HookAllowlist: []string{"/usr/bin/ok"}}, nil},
		{"default_devices", func(s *specs.Spec) {
			s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/null", Type: "c", Major: 1, Minor: 3}}
		}, Grants{}, Operator{}, nil},
		{"ro_rro_bind_sys", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/host-sys", Type: "bind", Source: "/sys", Options: []string{"rbind", "rro"}})
		}, Grants{}, Operator{CgroupNsDelegate: true}, nil},
		// CRI's and containerd's default: runc mounts it in the container's
		// own cgroup namespace, whose root is the container's cgroup.
		{"cgroup_mount_without_nsdelegate", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}})
		}, Grants{}, Operator{}, nil},
		{"cgroup_bind_with_nsdelegate", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/sys/fs/cgroup/unified", Options: []string{"bind", "ro"}})
		}, Grants{}, Operator{CgroupNsDelegate: true}, nil},
		{"cgroup_bind_clone3_enosys", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/sys/fs/cgroup/unified", Options: []string{"bind", "ro"}})
			enosys := uint(unix.ENOSYS)
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: []specs.Arch{specs.ArchX86_64},
				Syscalls: []specs.LinuxSyscall{{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys}}}
		}, Grants{}, Operator{}, nil},
		// CRI's read-only /sys rbind for a user-namespaced pod: host uid 0
		// is not mapped, so no process of it owns a host cgroup.procs.
		{"cgroup_rbind_userns_host_root_unmapped", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace}, specs.LinuxNamespace{Type: specs.UserNamespace})
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
			s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/cg", Type: "bind", Source: "/sys/fs/cgroup/unified", Options: []string{"bind", "ro"}})
		}, Grants{}, Operator{}, nil},
		{"bind_ordinary_dir_fstyper", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/data", Type: "bind", Source: "/srv/data", Options: []string{"rbind", "rw"}})
		}, Grants{}, Operator{FSTyper: func(string) (int64, error) { return unix.EXT4_SUPER_MAGIC, nil }, WritableBindRoots: []string{"/srv"}}, nil},
		{"net_sysctls_and_shm", func(s *specs.Spec) {
			s.Linux.Sysctl = map[string]string{"net.ipv4.ip_local_port_range": "1024 65000", "kernel.shm_rmid_forced": "1", "net.ipv4.tcp_syncookies": "1"}
		}, Grants{}, Operator{}, nil},
		{"joined_namespaces", func(s *specs.Spec) {
			for i := range s.Linux.Namespaces {
				s.Linux.Namespaces[i].Path = "/proc/77/ns/" + string(s.Linux.Namespaces[i].Type)
			}
		}, Grants{}, Operator{}, nil},
		{"no_user_ns_no_net_ns_is_shims_call", func(s *specs.Spec) { dropNS(s, specs.NetworkNamespace) }, Grants{}, Operator{}, nil},
		{"unconfined_lsm_recorded", func(s *specs.Spec) {
			s.Process.ApparmorProfile = "unconfined"
			s.Process.SelinuxLabel = "system_u:system_r:spc_t:s0"
		}, Grants{}, Operator{}, []string{"process.apparmorProfile: unconfined", "process.selinuxLabel: spc_t"}},
		{"duplicate_net_raw_everywhere", func(s *specs.Spec) {
			addCaps(s.Process.Capabilities, "CAP_NET_RAW", "CAP_NET_RAW")
		}, Grants{}, Operator{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ctrDefaultSpec(t)
			tc.mutate(s)
			res, err := CheckSpec(s, tc.g, tc.op)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !reflect.DeepEqual(res.Notes, tc.notes) {
				t.Errorf("notes %q, want %q", res.Notes, tc.notes)
			}
			assertNoNetRaw(t, s.Process)
		})
	}
}

func assertNoNetRaw(t testing.TB, p *specs.Process) {
	if p == nil || p.Capabilities == nil {
		return
	}
	for _, set := range capSets(p.Capabilities) {
		if slices.Contains(*set.caps, capNetRaw) {
			t.Fatalf("CAP_NET_RAW left in the %s set", set.name)
		}
	}
}

func TestCheckProcess(t *testing.T) {
	p := ctrDefaultSpec(t).Process
	p.NoNewPrivileges = false
	p.Capabilities.Ambient = []string{"CAP_NET_RAW", "CAP_NET_RAW"}
	removed, err := CheckProcess(p, Grants{}, Operator{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CAP_NET_RAW (bounding)", "CAP_NET_RAW (effective)", "CAP_NET_RAW (permitted)", "CAP_NET_RAW (ambient)"}
	if !reflect.DeepEqual(removed, want) || !p.NoNewPrivileges {
		t.Fatalf("removed %v nnp %v", removed, p.NoNewPrivileges)
	}
	assertNoNetRaw(t, p)

	p = ctrDefaultSpec(t).Process
	addCaps(p.Capabilities, "CAP_SYS_ADMIN")
	var r *spec.Refusal
	if _, err := CheckProcess(p, Grants{}, Operator{}); !errors.As(err, &r) || r.Reason != RuleRefusedCapability {
		t.Fatalf("exec with CAP_SYS_ADMIN: %v", err)
	}
}

func TestCheckGrants(t *testing.T) {
	if err := CheckGrants([]string{"CAP_SYS_NICE", "CAP_IPC_LOCK"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range Never {
		var r *spec.Refusal
		if err := CheckGrants([]string{c}); !errors.As(err, &r) || r.Reason != RuleRefusedCapability || r.Field != "capabilities[0]" {
			t.Errorf("%s: %v", c, err)
		}
	}
	var r *spec.Refusal
	if err := CheckGrants([]string{"sys_nice"}); !errors.As(err, &r) || r.Reason != RuleUnknownCapability {
		t.Errorf("lower case: %v", err)
	}
	if slices.Contains(Default, capNetRaw) || len(Default) != 13 {
		t.Errorf("Default %v", Default)
	}
}

// TestRecursiveBindSubmounts: rbind+ro of a kernel tree with nothing mounted
// beneath it is read-only; with submounts only rro is; a plain directory
// that carries a kernel filesystem beneath it is a kernel mount.
func TestRecursiveBindSubmounts(t *testing.T) {
	subs := map[string][]string{"/sys/fs/cgroup/unified": nil, "/srv/data": {"cgroup2"}, "/srv/plain": {"ext4"}}
	op := Operator{Submounts: func(p string) []string { return subs[p] }}
	for _, tc := range []struct {
		src, opts string
		refused   bool
	}{
		{"/sys/fs/cgroup/unified", "ro", false},
		{"/sys/fs/cgroup/unified", "rw", true},
		{"/srv/data", "ro", true},
		{"/srv/data", "rro", false},
		{"/srv/plain", "rw", false},
	} {
		s := ctrDefaultSpec(t)
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/d", Type: "bind", Source: tc.src, Options: []string{"rbind", tc.opts}})
		_, err := CheckSpec(s, Grants{}, op)
		var r *spec.Refusal
		if got := errors.As(err, &r) && r.Reason == RuleWritableKernelMount; got != tc.refused {
			t.Errorf("rbind %s %s: refused %v (%v), want %v", tc.src, tc.opts, got, err, tc.refused)
		}
	}
}

func TestCheckResourcesUnified(t *testing.T) {
	for _, tc := range []struct {
		key     string
		refused bool
	}{
		{"memory.max", false}, {"pids.max", false}, {"cgroup.type", true}, {"cgroup.subtree_control", true},
		{"cgroup.procs", true}, {"cgroup.kill", true}, {"nodot", true}, {"../memory.max", true},
	} {
		s := ctrDefaultSpec(t)
		s.Linux.Resources.Unified = map[string]string{tc.key: "1"}
		_, err := CheckSpec(s, Grants{}, Operator{})
		var r *spec.Refusal
		if got := errors.As(err, &r) && r.Reason == RuleCgroupUnified; got != tc.refused {
			t.Errorf("unified %q: refused %v (%v), want %v", tc.key, got, err, tc.refused)
		}
	}
}

func TestWritableHostPathsAndRoot(t *testing.T) {
	op := Operator{WritableBindRoots: []string{"/var/lib/kubelet/pods", "/srv/cache"}, StateDirs: []string{"/var/lib/gensee"},
		Submounts: func(string) []string { return nil }}
	for _, tc := range []struct {
		src, opt string
		rule     string
	}{
		{"/etc", "rw", RuleWritableHostPath},
		{"/work/main/bin", "rw", RuleWritableHostPath},
		{"/srv/cache/build", "rw", ""},
		{"/etc", "ro", ""},
		{"/var/lib/kubelet/pods/u/volumes/x", "rw", ""},
	} {
		s := ctrDefaultSpec(t)
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/d", Type: "bind", Source: tc.src, Options: []string{"rbind", tc.opt}})
		_, err := CheckSpec(s, Grants{}, op)
		var r *spec.Refusal
		got := ""
		if errors.As(err, &r) {
			got = r.Reason
		}
		if got != tc.rule {
			t.Errorf("bind %s %s: %v, want %q", tc.src, tc.opt, err, tc.rule)
		}
	}
	for _, tc := range []struct {
		root string
		ro   bool
		ok   bool
	}{
		{"/srv/rootfs", true, true}, {"/srv/rootfs", false, false}, {"/", true, false}, {"/run", true, false},
		{"/var/lib/gensee/x", true, false}, {"/sys/fs", true, false}, {"/var/lib", true, false},
	} {
		if err := CheckRootPath(tc.root, tc.ro, op); (err == nil) != tc.ok {
			t.Errorf("root %s readonly %v: %v, want ok %v", tc.root, tc.ro, err, tc.ok)
		}
	}
}

func TestAllowedRuntimeFiles(t *testing.T) {
	op := Operator{AllowedRuntimeFiles: []string{"/run/buildkit/otel-grpc.sock"}}
	for src, ok := range map[string]bool{"/run/buildkit/otel-grpc.sock": true, "/run/buildkit/buildkitd.sock": false, "/run/buildkit": false} {
		s := ctrDefaultSpec(t)
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/otel-grpc.sock", Type: "bind", Source: src, Options: []string{"bind", "ro"}})
		_, err := CheckSpec(s, Grants{}, op)
		if (err == nil) != ok {
			t.Errorf("bind %s: %v, want admitted %v", src, err, ok)
		}
	}
}

// TestNilCapabilitiesGetDefault: runc keeps every capability of a process
// whose spec has no capabilities object; admission sets the default set.
func TestNilCapabilitiesGetDefault(t *testing.T) {
	s := ctrDefaultSpec(t)
	s.Process.Capabilities = nil
	res, err := CheckSpec(s, Grants{}, Operator{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Process.Capabilities
	if c == nil || !slices.Equal(c.Bounding, Default) || !slices.Equal(c.Effective, Default) || !slices.Equal(c.Permitted, Default) || len(c.Ambient) != 0 {
		t.Fatalf("capabilities %+v, want the default set", c)
	}
	if len(res.Notes) == 0 {
		t.Errorf("not recorded: %v", res.Notes)
	}
}

func TestBoundarySysctlsRefused(t *testing.T) {
	for _, k := range []string{"net.ipv6.ip_nonlocal_bind", "net.ipv4.ip_nonlocal_bind", "net.ipv4.conf.all.route_localnet",
		"net.ipv4.ip_forward", "net.ipv6.conf.eth0.forwarding", "net.ipv4.conf.default.accept_local"} {
		s := ctrDefaultSpec(t)
		s.Linux.Sysctl = map[string]string{k: "1"}
		_, err := CheckSpec(s, Grants{}, Operator{})
		var r *spec.Refusal
		if !errors.As(err, &r) || r.Reason != RuleSysctl {
			t.Errorf("%s: %v, want a sysctl refusal", k, err)
		}
	}
}

func TestOtherPodsSandboxFilesRefused(t *testing.T) {
	s := criContainerSpec(t)
	if _, err := CheckSpec(s, Grants{}, Operator{WritableBindRoots: []string{"/var/lib/kubelet/pods"}, SandboxID: "another-pod"}); err == nil {
		t.Fatal("binds of another sandbox's hosts/resolv.conf/shm admitted")
	}
}

func TestBindPropagation(t *testing.T) {
	for _, o := range []string{"rslave", "shared", "rshared", "slave"} {
		s := ctrDefaultSpec(t)
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/d", Type: "bind", Source: "/srv/x", Options: []string{"bind", "ro", o}})
		_, err := CheckSpec(s, Grants{}, Operator{})
		var r *spec.Refusal
		if !errors.As(err, &r) || r.Reason != RuleMountPropagation {
			t.Errorf("%s: %v, want mount_propagation", o, err)
		}
	}
	s := ctrDefaultSpec(t)
	s.Mounts = append(s.Mounts, specs.Mount{Destination: "/d", Type: "bind", Source: "/srv/x", Options: []string{"bind", "ro"}})
	if _, err := CheckSpec(s, Grants{}, Operator{}); err != nil {
		t.Fatal(err)
	}
	if o := s.Mounts[len(s.Mounts)-1].Options; !slices.Contains(o, "rprivate") {
		t.Errorf("bind options %v: want rprivate added", o)
	}
}

func TestRbindCarryingOtherMounts(t *testing.T) {
	op := Operator{SocketFinder: func(string) (string, error) { return "", nil },
		Submounts: func(p string) []string {
			if p == "/srv/outer" {
				return []string{"tmpfs"}
			}
			return nil
		}}
	s := ctrDefaultSpec(t)
	s.Mounts = append(s.Mounts, specs.Mount{Destination: "/d", Type: "bind", Source: "/srv/outer", Options: []string{"rbind", "rro"}})
	_, err := CheckSpec(s, Grants{}, op)
	var r *spec.Refusal
	if !errors.As(err, &r) || r.Reason != RuleBindSocket {
		t.Fatalf("rbind carrying a tmpfs: %v, want bind_socket", err)
	}
}
