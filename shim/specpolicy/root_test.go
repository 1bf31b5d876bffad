package specpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestRootSeccompUnderRunc proves the merged profile under the real runc and libseccomp:
// for each starting profile, a static probe inside the container must see the refused
// families and io_uring fail with EPERM while AF_INET, AF_UNIX and NETLINK_ROUTE work.
// CAP_NET_RAW and CAP_NET_ADMIN are put back after CheckSpec so that every EPERM is
// seccomp's, not the kernel's capability check.
func TestRootSeccompUnderRunc(t *testing.T) {
	if os.Getenv("GENSEE_ROOT_TESTS") != "1" {
		t.Skip("set GENSEE_ROOT_TESTS=1 (as root) to run runc")
	}
	if os.Geteuid() != 0 {
		t.Fatal("GENSEE_ROOT_TESTS=1 but not root: this test runs runc and must be root")
	}
	runc := runcPath(t)
	probes := buildProbes(t)

	// Docker/containerd RuntimeDefault style with socket(2) allowed unconditionally.
	errnoAllowSocket := seccomp.DefaultProfile(ctrDefaultSpec(t))
	errnoAllowSocket.Syscalls = slices.DeleteFunc(errnoAllowSocket.Syscalls, func(sc specs.LinuxSyscall) bool {
		return slices.Equal(sc.Names, []string{"socket"})
	})
	errnoAllowSocket.Syscalls = append(errnoAllowSocket.Syscalls, specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActAllow})
	cases := []struct {
		name    string
		profile *specs.LinuxSeccomp
	}{
		{"no_profile", nil},
		{"containerd_default", seccomp.DefaultProfile(ctrDefaultSpec(t))},
		{"errno_default_unconditional_socket", errnoAllowSocket},
	}
	// Control: without admission (and with the capabilities), AF_PACKET and
	// NETLINK_NETFILTER sockets are made, so the EPERMs below are the merged profile's.
	t.Run("control_unadmitted", func(t *testing.T) {
		s := rootSpec(t, nil)
		addCaps(s.Process.Capabilities, "CAP_NET_ADMIN")
		s.Process.Args = []string{"/probe"}
		out, err := runContainer(t, runc, s, probes[0].path)
		t.Logf("%s", out)
		if err != nil || !strings.Contains(string(out), "af_packet=ok") || !strings.Contains(string(out), "netlink_netfilter=ok") || !strings.Contains(string(out), "af_packet_high_bits=ok") {
			t.Fatalf("control container could not make the sockets the test refuses: %v", err)
		}
	})
	for _, tc := range cases {
		for _, probe := range probes {
			t.Run(tc.name+"/"+probe.arch, func(t *testing.T) {
				s := rootSpec(t, tc.profile)
				if _, err := CheckSpec(s, Grants{}, Operator{}); err != nil {
					t.Fatalf("CheckSpec: %v", err)
				}
				addCaps(s.Process.Capabilities, "CAP_NET_RAW", "CAP_NET_ADMIN")
				args := []string{"/probe", "-check"}
				x86 := slices.Contains(s.Linux.Seccomp.Architectures, specs.ArchX86)
				if probe.arch == "386" && x86 {
					// Kept only when no socket rule allows: every muxed socketcall(2)
					// then fails, so every 32-bit socket does.
					args = append(args, "-allowed=EPERM")
				}
				s.Process.Args = args
				out, err := runContainer(t, runc, s, probe.path)
				t.Logf("%s", out)
				if probe.arch == "386" && !x86 {
					// SCMP_ARCH_X86 was dropped: a 32-bit process dies at its first
					// syscall (the filter's bad-arch action) and makes no socket.
					if err == nil || strings.Contains(string(out), "=ok") {
						t.Fatalf("32-bit probe ran under a profile without SCMP_ARCH_X86: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("probe under merged profile: %v", err)
				}
			})
		}
	}
}

type probeBin struct{ arch, path string }

func buildProbes(t *testing.T) []probeBin {
	dir := t.TempDir()
	var out []probeBin
	for _, arch := range []string{"amd64", "386"} {
		bin := filepath.Join(dir, "sockprobe-"+arch)
		cmd := exec.Command("go", "build", "-o", bin, "./testdata/sockprobe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build sockprobe for %s: %v\n%s", arch, err, b)
		}
		out = append(out, probeBin{arch, bin})
	}
	return out
}

func runcPath(t *testing.T) string {
	var cands []string
	if d := os.Getenv("GENSEE_BIN"); d != "" {
		cands = append(cands, filepath.Join(d, "runc"))
	}
	cands = append(cands, "/work/main/bin/runc")
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	t.Fatalf("no runc binary at %v: run make deps", cands)
	return ""
}

// rootSpec is containerd's default ctr spec (see fixtures_test.go) with a profile.
func rootSpec(t *testing.T, profile *specs.LinuxSeccomp) *specs.Spec {
	s := ctrDefaultSpec(t)
	s.Process.Terminal = false
	s.Root = &specs.Root{Path: "rootfs"}
	if profile != nil {
		b, _ := json.Marshal(profile)
		var p specs.LinuxSeccomp
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		s.Linux.Seccomp = &p
	}
	return s
}

func addCaps(c *specs.LinuxCapabilities, caps ...string) {
	for _, set := range capSets(c) {
		*set.caps = append(*set.caps, caps...)
	}
}

// runContainer writes a bundle (busybox plus the probe) and runs it with a private runc
// root and a test-only cgroup parent, removing all of it afterwards.
func runContainer(t *testing.T, runc string, s *specs.Spec, probe string) ([]byte, error) {
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"bin", "proc", "sys", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, "/bin/busybox", filepath.Join(rootfs, "bin", "busybox"))
	copyFile(t, probe, filepath.Join(rootfs, "probe"))

	id := fmt.Sprintf("specpolicy-%d-%d", os.Getpid(), time.Now().UnixNano())
	parent := "gensee-specpolicy-test-" + id
	s.Linux.CgroupsPath = "/" + parent + "/" + id
	t.Cleanup(func() { removeCgroupParent(t, parent) })

	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "runc-root")
	t.Cleanup(func() {
		_ = exec.Command(runc, "--root", root, "delete", "-f", id).Run()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, runc, "--root", root, "run", "--bundle", bundle, id)
	return cmd.CombinedOutput()
}

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("copy %s: %v", from, err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// removeCgroupParent removes the test parent (and any leftover child) from every
// mounted hierarchy: cgroups are hybrid on some hosts (v1 controllers plus cgroup2 at
// /sys/fs/cgroup/unified).
func removeCgroupParent(t *testing.T, parent string) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
	if d := "/sys/fs/cgroup/" + parent; exists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		kids, _ := os.ReadDir(d)
		for _, k := range kids {
			if k.IsDir() {
				_ = os.Remove(filepath.Join(d, k.Name()))
			}
		}
		if err := os.Remove(d); err != nil {
			t.Errorf("remove test cgroup %s: %v", d, err)
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
