package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/hostfacts"
	"github.com/gensee/gensee/spec"
)

// The hostile-spec tests play a caller who can write any field of the
// container spec ctr or a pod author can, and a workload that runs any
// code inside. Each case asserts the exact refusal rule, or that the
// attempt fails in the kernel.

func hostileCatalog() spec.Catalog {
	nice := denyAll("nice")
	nice.Capabilities = []string{"CAP_SYS_NICE"}
	return catalogOf([]spec.Contract{denyAll("offline"), nice, productsContract()},
		selector("it-hostile", map[string]string{"build": "offline"}, "offline"),
		selector("it-nice", map[string]string{"build": "nice"}, "nice"),
		selector("it-hgate", map[string]string{"build": "products"}, "products"))
}

// refusedWith runs a container that must be refused with rule.
func (e *env) refusedWith(t *testing.T, ns, id, rule string, flags []string, args ...string) {
	t.Helper()
	out, code := e.run(ns, id, flags, args...)
	if code == 0 || !strings.Contains(out, "admission refused: "+rule+":") {
		t.Fatalf("%v %v: exit %d, want refusal %s\n%s", flags, args, code, rule, out)
	}
}

// TestHostileCapabilities: every capability that defeats the boundary or
// the admission clock is refused; one the default set lacks is refused
// unless the contract grants it; CAP_NET_RAW is removed wherever it is.
func TestHostileCapabilities(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	for _, c := range []string{"CAP_SYS_MODULE", "CAP_SYS_PTRACE", "CAP_SYS_TIME", "CAP_DAC_READ_SEARCH",
		"CAP_SYS_RAWIO", "CAP_BPF", "CAP_PERFMON", "CAP_SYS_BOOT", "CAP_MAC_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_ADMIN"} {
		e.refusedWith(t, "it-hostile", "cap", "refused_capability", []string{"--cap-add", c}, "/bin/true")
	}
	e.refusedWith(t, "it-hostile", "nice", "capability_not_granted", []string{"--cap-add", "CAP_SYS_NICE"}, "/bin/true")
	if out, code := e.run("it-nice", "nice", []string{"--cap-add", "CAP_SYS_NICE"}, "/bin/true"); code != 0 {
		t.Fatalf("CAP_SYS_NICE granted by the contract: exit %d\n%s", code, out)
	}
	// NET_RAW listed twice in every set (and ambient) is still gone.
	out, code := e.run("it-hostile", "dupraw", []string{"--cap-add", "CAP_NET_RAW", "--cap-add", "CAP_NET_RAW"}, "/bin/probe", "socket", "raw4")
	if code != 1 || !strings.Contains(out, "operation not permitted") {
		t.Fatalf("raw socket with CAP_NET_RAW added twice: exit %d\n%s", code, out)
	}
}

// TestHostileExec: an exec'd process gets the init's capability policy:
// no packet or raw sockets, no_new_privs; the removal is a fact of the
// manifest (counted per exec), not an event.
func TestHostileExec(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	ns := e.ns("it-hostile")
	e.ctr(ns, "run", "-d", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "c1", "/bin/sleep", "300")
	t.Cleanup(func() {
		e.ctrErr(ns, "tasks", "kill", "-s", "SIGKILL", "c1")
		waitStopped(e, ns, "c1")
		e.ctrErr(ns, "tasks", "delete", "c1")
		e.ctrErr(ns, "containers", "delete", "c1")
	})
	for _, kind := range []string{"packet", "raw4", "vsock"} {
		out, err := e.ctrErr(ns, "tasks", "exec", "--exec-id", "x-"+kind, "c1", "/bin/probe", "socket", kind)
		if err == nil || !strings.Contains(out, "operation not permitted") {
			t.Fatalf("exec probe socket %s: %v, want EPERM\n%s", kind, err, out)
		}
	}
	out, err := e.ctrErr(ns, "tasks", "exec", "--exec-id", "nnp", "c1", "/bin/sh", "-c", "grep NoNewPrivs /proc/self/status")
	if err != nil || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Fatalf("exec no_new_privs: %v\n%s", err, out)
	}
	if n := countKind(e.events("it-hostile", "c1"), spec.EventCapabilityRemoved, ""); n != 0 {
		t.Fatalf("capability_removed events: %d, want none (a routine rewrite is a manifest fact)", n)
	}
	e.ctr(ns, "tasks", "kill", "-s", "SIGKILL", "c1")
	waitStopped(e, ns, "c1")
	m := e.manifest("it-hostile", "c1")
	if len(m.Enforcement.CapabilitiesRemoved) != 1 || m.Enforcement.CapabilitiesRemovedExecs != 4 {
		t.Fatalf("enforcement: capabilities_removed %v from %d execs, want CAP_NET_RAW from 4", m.Enforcement.CapabilitiesRemoved, m.Enforcement.CapabilitiesRemovedExecs)
	}
}

// TestHostileSockets: the families nftables cannot see are closed by
// seccomp, with no profile and with containerd's default one.
func TestHostileSockets(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	for _, flags := range [][]string{nil, {"--seccomp"}} {
		for _, kind := range []string{"packet", "vsock", "xdp", "key", "bluetooth", "nfnetlink", "iouring"} {
			out, code := e.run("it-hostile", "sock", flags, "/bin/probe", "socket", kind)
			if code != 1 || !strings.Contains(out, "operation not permitted") {
				t.Fatalf("%v socket %s: exit %d, want EPERM\n%s", flags, kind, code, out)
			}
		}
		for _, kind := range []string{"inet", "unix", "rtnetlink"} {
			if out, code := e.run("it-hostile", "sock", flags, "/bin/probe", "socket", kind); code != 0 {
				t.Fatalf("%v socket %s: exit %d, want it to open\n%s", flags, kind, code, out)
			}
		}
	}
	m := e.manifest("it-hostile", "sock")
	if m.Enforcement.Seccomp == nil || len(m.Enforcement.Seccomp.SocketFamiliesRefused) < 5 {
		t.Fatalf("manifest seccomp enforcement: %+v", m.Enforcement.Seccomp)
	}
}

// TestHostileMounts: writable kernel filesystems, runtime sockets and
// mounts over the entrypoint are refused; a read-only cgroup2 bind is
// refused where cgroup2 lacks nsdelegate, and through it the process cannot
// leave its cgroup elsewhere.
func TestHostileMounts(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	h, err := cgroup.Find()
	must(t, err)
	cg := h.Mountpoint
	e.refusedWith(t, "it-hostile", "cgrw", "writable_kernel_mount",
		[]string{"--mount", "type=bind,src=" + cg + ",dst=/hostcg,options=rbind:rw"}, "/bin/probe", "cgmove", "/hostcg")
	e.refusedWith(t, "it-hostile", "sysrw", "writable_kernel_mount",
		[]string{"--mount", "type=bind,src=/sys,dst=/hostsys,options=rbind:rw"}, "/bin/true")
	e.refusedWith(t, "it-hostile", "sock", "runtime_socket",
		[]string{"--mount", "type=bind,src=" + filepath.Dir(e.sock) + ",dst=/run/ctrd,options=rbind:ro"}, "/bin/true")
	cgro := []string{"--mount", "type=bind,src=" + cg + ",dst=/hostcg,options=rbind:ro"}
	if !hostfacts.CgroupNsDelegate(hostfacts.MountTable()) {
		// Without nsdelegate clone3 starts a child in any cgroup the bind
		// names (the host's root here), read-only or not: refused.
		e.refusedWith(t, "it-hostile", "cgro", "cgroup_bind", cgro, "/bin/probe", "cgclone", "/hostcg")
	} else {
		out, code := e.run("it-hostile", "cgro", cgro, "/bin/probe", "cgmove", "/hostcg")
		if code != 1 || !strings.Contains(out, "read-only file system") {
			t.Fatalf("cgroup move through a read-only bind: exit %d, want EROFS\n%s", code, out)
		}
		if out, code := e.run("it-hostile", "cgro2", cgro, "/bin/probe", "cgclone", "/hostcg"); code != 1 {
			t.Fatalf("clone3 into the host's root cgroup under nsdelegate: exit %d, want refused\n%s", code, out)
		}
	}
	if h.Mountpoint != "/sys/fs/cgroup" {
		// A hybrid host: ctr's default cgroup mount (type cgroup, admitted)
		// holds no cgroup2 hierarchy to clone3 into.
		if out, code := e.run("it-hostile", "cgdef", nil, "/bin/probe", "cgclone", h.Mountpoint); code != 1 {
			t.Fatalf("clone3 into %s through the default cgroup mount: exit %d, want refused\n%s", h.Mountpoint, code, out)
		}
	}
	bin := filepath.Join(e.dir, "fakebin")
	must(t, os.MkdirAll(bin, 0o755))
	must(t, os.WriteFile(filepath.Join(bin, "probe"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	e.refusedWith(t, "it-hostile", "over", "entrypoint_mount",
		[]string{"--mount", "type=bind,src=" + bin + ",dst=/bin,options=rbind:ro"}, "/bin/probe", "sleep", "1")
	e.refusedWith(t, "it-hostile", "dev", "device", []string{"--device", "/dev/kmsg"}, "/bin/true")
	// A tree holding a unix socket: connect(2) works through read-only.
	sockDir := filepath.Join(e.dir, "sockdir")
	must(t, os.MkdirAll(filepath.Join(sockDir, "sub"), 0o755))
	sl, err := net.Listen("unix", filepath.Join(sockDir, "sub", "host.sock"))
	must(t, err)
	defer sl.Close()
	e.refusedWith(t, "it-hostile", "sockbind", "bind_socket",
		[]string{"--mount", "type=bind,src=" + sockDir + ",dst=/opt/s,options=rbind:ro"}, "/bin/true")
	// A writable host path outside the operator's writable_bind_roots.
	e.refusedWith(t, "it-hostile", "etcrw", "writable_host_path",
		[]string{"--mount", "type=bind,src=" + bin + ",dst=/opt/w,options=rbind:rw"}, "/bin/true")
	if out, code := e.run("it-hostile", "etcro", []string{"--mount", "type=bind,src=" + bin + ",dst=/opt/w,options=rbind:ro"}, "/bin/true"); code != 0 {
		t.Fatalf("read-only host bind refused: exit %d\n%s", code, out)
	}
	// ctr's spec has no cgroup namespace: the shim adds one.
	if rec := e.admissionRecord("it-hostile", "etcro"); !strings.Contains(fmt.Sprint(rec["notes"]), "cgroup namespace") {
		t.Fatalf("cgroup namespace not added: notes %v", rec["notes"])
	}
}

// TestHostileSpecFields: fields only a full spec can carry (ctr --config):
// caller hooks, emptied masked paths, non-network sysctls, a joined netns
// owned by another user namespace.
func TestHostileSpecFields(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	base := e.baseSpec(t)
	for _, tc := range []struct {
		name   string
		rule   string
		mutate func(s *specs.Spec)
	}{
		{"hook", "spec_hook", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{CreateRuntime: []specs.Hook{{Path: "/bin/true"}}}
		}},
		{"unmasked", "unmasked_proc", func(s *specs.Spec) { s.Linux.MaskedPaths = nil; s.Linux.ReadonlyPaths = nil }},
		{"sysctl", "sysctl", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"kernel.msgmax": "65536"} }},
		{"bpfsysctl", "sysctl", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"net.core.bpf_jit_enable": "1"} }},
		{"hostpidpath", "host_pid", func(s *specs.Spec) { setNamespacePath(s, specs.PIDNamespace, "/proc/1/ns/pid") }},
		{"hostipcpath", "host_ipc", func(s *specs.Spec) { setNamespacePath(s, specs.IPCNamespace, "/proc/1/ns/ipc") }},
		{"mountnspath", "mount_ns_path", func(s *specs.Spec) { setNamespacePath(s, specs.MountNamespace, "/proc/1/ns/mnt") }},
		{"hostpid", "host_pid", func(s *specs.Spec) {
			s.Linux.Namespaces = slices.DeleteFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.PIDNamespace })
		}},
		{"usernspath", "userns_path", func(s *specs.Spec) {
			// Outside CRI's namespace no user namespace is joined by path.
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace, Path: "/proc/1/ns/user"})
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
			s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
		}},
		{"propagation", "mount_propagation", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/opt/p", Type: "bind", Source: filepath.Join(e.dir, "spec-rootfs", "etc"), Options: []string{"bind", "ro", "rslave"}})
		}},
		{"nonlocalbind", "sysctl", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"net.ipv6.ip_nonlocal_bind": "1"} }},
		{"foreignns", "netns_foreign_userns", func(s *specs.Spec) {
			for i := range s.Linux.Namespaces {
				if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
					s.Linux.Namespaces[i].Path = e.foreignNetns(t)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			out, err := e.runSpec(t, "it-hostile", "spec-"+tc.name, s)
			if err == nil || !strings.Contains(out, "admission refused: "+tc.rule+":") {
				t.Fatalf("want refusal %s: %v\n%s", tc.rule, err, out)
			}
		})
	}
	// No capabilities object: runc would keep every capability; admission
	// gives the default set, so a raw socket (NET_RAW) and CAP_SYS_ADMIN
	// are absent.
	nocaps := base()
	nocaps.Process.Capabilities = nil
	nocaps.Process.Args = []string{"/bin/busybox", "sh", "-c", "grep CapBnd /proc/self/status; /bin/probe socket raw4"}
	if out, err := e.runSpec(t, "it-hostile", "spec-nocaps", nocaps); err == nil || !strings.Contains(out, "operation not permitted") || !strings.Contains(out, "CapBnd:\t00000000a80405fb") {
		t.Fatalf("spec without capabilities: %v\n%s", err, out)
	}
	// linux.cgroupsPath naming a cgroup that already holds a process.
	h, err := cgroup.Find()
	must(t, err)
	busy := filepath.Join(h.Mountpoint, fmt.Sprintf("gensee-it-busy-%d", os.Getpid()))
	must(t, os.Mkdir(busy, 0o755))
	sleeper := exec.Command("sleep", "60")
	must(t, sleeper.Start())
	must(t, os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0))
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait(); os.Remove(busy) })
	joined := base()
	joined.Linux.CgroupsPath = "/" + filepath.Base(busy)
	if out, err := e.runSpec(t, "it-hostile", "spec-busycg", joined); err == nil || !strings.Contains(out, "admission refused: cgroup_not_own:") {
		t.Fatalf("joining a busy cgroup: %v\n%s", err, out)
	}
	if err := sleeper.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process in the joined cgroup was killed: %v", err)
	}
	// A host directory as root must be read-only and no runtime's tree.
	for name, root := range map[string]*specs.Root{"rootrw": {Path: e.dir + "/spec-rootfs"}, "rootslash": {Path: "/", Readonly: true}} {
		s := base()
		s.Root = root
		s.Process.Args = []string{"/bin/busybox", "true"} // in both trees, so observation succeeds
		if out, err := e.runSpec(t, "it-hostile", "spec-"+name, s); err == nil || !strings.Contains(out, "admission refused: root_path:") && !strings.Contains(out, "admission refused: runtime_socket:") {
			t.Fatalf("%s: want a root.path refusal: %v\n%s", name, err, out)
		}
	}
	// A relative bind source would resolve through the image's symlinks.
	rel := base()
	rel.Mounts = append(rel.Mounts, specs.Mount{Destination: "/hostcg", Type: "bind", Source: "rootfs/x", Options: []string{"rbind", "rw"}})
	if out, err := e.runSpec(t, "it-hostile", "spec-relbind", rel); err == nil || !strings.Contains(out, "admission refused: mount_type:") {
		t.Fatalf("relative bind source: want mount_type: %v\n%s", err, out)
	}
	// The unmodified spec is admitted: the refusals above are the fields'.
	if out, err := e.runSpec(t, "it-hostile", "spec-plain", base()); err != nil {
		t.Fatalf("plain spec refused: %v\n%s", err, out)
	}
}

// TestHostileCgroupEscape: a process moved out of its cgroup by the host
// in a private netns is still denied (the table fails closed there); in
// the host netns it fires policy_unbound with its pid and the manifest
// says the escape happened instead of "enforced".
func TestHostileCgroupEscape(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	ns := e.ns("it-hostile")
	outside := outsideCgroup(t, "outside")
	moveInit := func(id string) int {
		pid := int(e.admissionRecord("it-hostile", id)["subject"].(map[string]any)["init_pid"].(float64))
		must(t, os.WriteFile(filepath.Join(outside, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0))
		return pid
	}

	// Private netns: the shell is moved out before it forks the probe.
	logPath := filepath.Join(e.dir, "escape.log")
	e.ctr(ns, "run", "-d", "--log-uri", e.logURI(t, logPath), "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "esc",
		"/bin/sh", "-c", "sleep 2; /bin/probe connect tcp 127.0.0.1:9; echo rc=$?")
	moveInit("esc")
	waitStopped(e, ns, "esc")
	e.ctr(ns, "tasks", "delete", "esc")
	e.ctr(ns, "containers", "delete", "esc")
	log, _ := os.ReadFile(logPath)
	if !strings.Contains(string(log), "rc=1") || strings.Contains(string(log), "connection refused") {
		t.Fatalf("escaped process in a private netns reached loopback (want a dropped SYN, not a reset):\n%s", log)
	}
	if m := e.manifest(ns, "esc"); len(m.Observation.Escapes) == 0 {
		t.Fatalf("private netns: escape not recorded: %+v", m.Observation)
	}

	// Host netns: policy_unbound with the pid as target; manifest says so.
	e.ctr(ns, "run", "-d", "--net-host", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "esch", "/bin/sleep", "300")
	t.Cleanup(func() {
		e.ctrErr(ns, "tasks", "kill", "-s", "SIGKILL", "esch")
		e.ctrErr(ns, "tasks", "delete", "-f", "esch")
		e.ctrErr(ns, "containers", "delete", "esch")
	})
	pid := moveInit("esch")
	waitFor(t, 10*time.Second, "policy_unbound with the moved pid", func() bool {
		for _, ev := range e.events("it-hostile", "esch") {
			if ev.Kind == spec.EventPolicyUnbound && strings.Contains(ev.Target, strconv.Itoa(pid)) {
				return true
			}
		}
		return false
	})
	e.ctr(ns, "tasks", "kill", "-s", "SIGKILL", "esch")
	waitStopped(e, ns, "esch")
	e.ctr(ns, "tasks", "delete", "esch")
	m := e.manifest(ns, "esch")
	if m.Enforcement.Network.Status != spec.NetworkEscapeDetected || len(m.Observation.Escapes) == 0 || m.Observation.Escapes[0].PID != pid {
		t.Fatalf("host netns escape: status %q escapes %+v", m.Enforcement.Network.Status, m.Observation.Escapes)
	}
}

// outsideCgroup makes cgroup gensee-it-NAME-<pid> at the root of the
// cgroup2 hierarchy, for the test to move a container's process out of its
// own; cleanup kills what is still in it and removes it.
func outsideCgroup(t *testing.T, name string) string {
	t.Helper()
	h, err := cgroup.Find()
	must(t, err)
	outside := filepath.Join(h.Mountpoint, fmt.Sprintf("gensee-it-%s-%d", name, os.Getpid()))
	must(t, os.Mkdir(outside, 0o755))
	t.Cleanup(func() {
		if b, _ := os.ReadFile(filepath.Join(outside, "cgroup.procs")); len(b) > 0 {
			os.WriteFile(filepath.Join(outside, "cgroup.kill"), []byte("1"), 0)
			time.Sleep(200 * time.Millisecond)
		}
		if err := os.Remove(outside); err != nil {
			t.Errorf("remove %s: %v", outside, err)
		}
	})
	return outside
}

// TestHostileRestoredMtime: bytes rewritten with size and mtime restored
// are still an unclaimed change.
func TestHostileRestoredMtime(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	ns := e.ns("it-hgate")
	run := func(id string, args ...string) spec.Manifest {
		all := append([]string{"run", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, id}, args...)
		e.ctrErr(ns, all...) // ctr run deletes the task when it exits
		e.ctr(ns, "containers", "delete", id)
		return e.manifest(ns, id)
	}
	plain := run("plain", "/bin/true")
	hidden := run("hidden", "/bin/probe", "rewrite", "/etc/base.txt", "FROM THE IMAGE\n")
	if hidden.Unclaimed.Count != plain.Unclaimed.Count+1 || hidden.Unclaimed.Digest == plain.Unclaimed.Digest {
		t.Fatalf("rewrite with restored mtime: unclaimed %+v, without: %+v", hidden.Unclaimed, plain.Unclaimed)
	}
}

// baseSpec returns a factory of ctr's own spec for the test image with
// root.path pointing at an unpacked copy of it, for ctr run --config.
func (e *env) baseSpec(t *testing.T) func() *specs.Spec {
	t.Helper()
	ns := e.ns("it-hostile")
	e.ctr(ns, "containers", "create", "--runtime", runtimeName, e.image, "spec-template", "/bin/probe", "sleep", "0")
	info := e.ctr(ns, "containers", "info", "spec-template")
	e.ctr(ns, "containers", "delete", "spec-template")
	var c struct{ Spec specs.Spec }
	if i := strings.Index(info, "{"); i > 0 {
		info = info[i:] // past the daemon's warnings on stderr
	}
	must(t, json.Unmarshal([]byte(info), &c))
	root := filepath.Join(e.dir, "spec-rootfs")
	must(t, os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	for _, d := range []string{"etc", "tmp", "proc", "sys", "dev", "run"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for _, m := range c.Spec.Mounts { // the root is read-only: runc cannot make them
		must(t, os.MkdirAll(filepath.Join(root, m.Destination), 0o755))
	}
	for src, dst := range map[string]string{"/bin/busybox": "bin/busybox", filepath.Join(e.dir, "probe"): "bin/probe"} {
		b, err := os.ReadFile(src)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(root, dst), b, 0o755))
	}
	return func() *specs.Spec {
		var s specs.Spec
		b, _ := json.Marshal(c.Spec)
		must(t, json.Unmarshal(b, &s))
		s.Root = &specs.Root{Path: root, Readonly: true}
		return &s
	}
}

func setNamespacePath(s *specs.Spec, t specs.LinuxNamespaceType, path string) {
	for i := range s.Linux.Namespaces {
		if s.Linux.Namespaces[i].Type == t {
			s.Linux.Namespaces[i].Path = path
		}
	}
}

// runSpec runs a container from a full spec (ctr run --config). It names
// no runtime options: the shim reads the daemon's GENSEE_CONFIG (ctr cannot
// combine runtimeoptions with a user namespace).
func (e *env) runSpec(t *testing.T, ns, id string, s *specs.Spec) (string, error) {
	t.Helper()
	p := filepath.Join(e.dir, id+".json")
	b, err := json.Marshal(s)
	must(t, err)
	must(t, os.WriteFile(p, b, 0o644))
	out, err := e.ctrErr(e.ns(ns), "run", "--rm", "--runtime", runtimeName, "--config", p, id)
	e.ctrErr(e.ns(ns), "containers", "delete", id)
	return out, err
}

// foreignNetns is a network namespace owned by a new user namespace, held
// by a sleeping process the test kills at cleanup.
func (e *env) foreignNetns(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}}
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)
}

// TestUserNamespaceContainer: a container in its own user namespace is
// admitted; its root cannot reach the table (no NET_ADMIN in any set,
// NETLINK_NETFILTER closed), a nested user+network namespace reaches
// nothing, and deny_all holds. (ctr --uidmap cannot be combined with
// --runtime-config-path, so the spec is given whole.)
func TestUserNamespaceContainer(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	n := newTestNet(t)
	l := n.listenTCP(serverIP + ":8080")
	base := e.baseSpec(t)
	// The mapped root (host uid 200000) must be able to reach the rootfs.
	must(t, os.Chmod(e.dir, 0o711))
	withUserns := func(netns string) *specs.Spec {
		s := base()
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
		s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
		setNamespacePath(s, specs.NetworkNamespace, netns)
		if netns != "" {
			// sysfs cannot be mounted for a netns the user namespace does
			// not own: bind the host's read-only, as CRI does for such pods.
			for i, m := range s.Mounts {
				if m.Type == "sysfs" {
					s.Mounts[i] = specs.Mount{Destination: "/sys", Type: "bind", Source: "/sys", Options: []string{"rbind", "nosuid", "nodev", "noexec", "rro"}}
				}
			}
		}
		return s
	}
	s := withUserns(n.ClientPath)
	s.Process.Args = []string{"/bin/busybox", "sh", "-c",
		"/bin/probe socket nfnetlink; echo nft=$?; /bin/probe connect tcp " + serverIP + ":8080; echo out=$?; /bin/probe nested-connect tcp " + serverIP + ":8080; echo nested=$?; /bin/busybox cat /proc/self/uid_map"}
	out, err := e.runSpec(t, "it-hostile", "uns", s)
	if err != nil {
		t.Fatalf("user-namespaced container: %v\n%s", err, out)
	}
	for _, want := range []string{"nft=1", "out=1", "nested=1", "200000", "operation not permitted"} {
		if !strings.Contains(out, want) {
			t.Fatalf("want %q in\n%s", want, out)
		}
	}
	if n := l.accepted.Load(); n != 0 {
		t.Fatalf("the server saw %d connections from a deny_all container in a user namespace", n)
	}
	if rec := e.admissionRecord("it-hostile", "uns"); rec["user_namespace"] != true {
		t.Fatalf("admission record: user_namespace %v", rec["user_namespace"])
	}
	// A private netns runc makes inside the container's own user namespace.
	s = withUserns("")
	s.Process.Args = []string{"/bin/busybox", "sh", "-c", "/bin/probe connect tcp 127.0.0.1:9; echo rc=$?"}
	out, err = e.runSpec(t, "it-hostile", "unsp", s)
	if err != nil || !strings.Contains(out, "rc=1") || strings.Contains(out, "connection refused") {
		t.Fatalf("private netns owned by the container's user namespace (want a dropped SYN): %v\n%s", err, out)
	}
}

// TestManifestVerifyRaisesProductMismatch: a staged product changed after
// the gate is found by `gensee manifest verify`, which exits 1 and raises
// product_mismatch and attention on the operation.
func TestManifestVerifyRaisesProductMismatch(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	script := "mkdir -p /workspace/out && echo '{\"ok\":true}' > /workspace/out/result.json"
	if out, code := e.run("it-hgate", "tampered", nil, "/bin/sh", "-c", script); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	must(t, os.WriteFile(e.stagedPath("it-hgate", "tampered", "out/result.json"), []byte("{\"ok\":false}\n"), 0o644))
	out, err := exec.Command(filepath.Join(e.bin, "gensee"), "manifest", "verify", "--config", e.cfgPath,
		"--container", "tampered", "--namespace", "it-hgate").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("manifest verify of a tampered product: %v, want exit 1\n%s", err, out)
	}
	if n := countKind(e.events("it-hgate", "tampered"), spec.EventProductMismatch, ""); n == 0 {
		t.Fatalf("no product_mismatch event after verify:\n%s", out)
	}
	if a, ok := e.attention("it-hgate", "tampered"); !ok || len(a.Findings) == 0 || a.Findings[0].Signature != "product_mismatch" {
		t.Fatalf("attention %+v (set %v), want product_mismatch", a, ok)
	}
}
