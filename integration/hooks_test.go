package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/hooks"
	"github.com/gensee/gensee/shim/hostfacts"
	"github.com/gensee/gensee/shim/nsfile"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// TestHooksPodman: podman (Debian's 4.3) with the gensee OCI hook in its
// hooks dir, real runc, the cgroupfs manager and a private storage; one
// podman for every scenario, the catalog republished for each.
func TestHooksPodman(t *testing.T) {
	p := startPodman(t, denyAll("deny"))
	t.Run("DenyAll", func(t *testing.T) { p.denyAllHost(t) })
	t.Run("AllowExact", func(t *testing.T) { p.allowExact(t) })
	t.Run("Refused", func(t *testing.T) { p.refused(t) })
	t.Run("Product", func(t *testing.T) { p.productStaged(t) })
}

// finishedAtPoststop: the operation ended through poststop (not the
// monitor's grace), its table removed, its monitor gone.
func (p *podmanEnv) finishedAtPoststop(t *testing.T, m *spec.Manifest) {
	t.Helper()
	for _, n := range m.Enforcement.NotEnforced {
		if strings.HasPrefix(n, "poststop never came") {
			t.Errorf("the operation was finished by the monitor's grace, not by poststop")
		}
	}
	if m.Enforcement.Network.TableRemoved == "" {
		t.Errorf("table %s not removed: %+v", m.Enforcement.Network.Table, m.Enforcement.Network)
	}
	if _, err := os.Stat(filepath.Join(p.e.state, "ocihooks", m.OperationID+".json")); err == nil {
		t.Errorf("marker of operation %s left", m.OperationID)
	}
}

// denyAllHost: a deny_all container on the host network cannot reach a
// loopback server; the manifest counts the denial and the table is gone.
func (p *podmanEnv) denyAllHost(t *testing.T) {
	p.publish(denyAll("deny"))
	port, seen := runListener(t)
	out, code := p.run("deny", []string{"--network=host"}, "/bin/probe", "connect", "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if code != 1 {
		t.Fatalf("podman run: exit %d, want 1 (the probe refused)\n%s", code, out)
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the loopback server saw %d connections", n)
	}
	_, m := p.lastOperation(t)
	if m.Contract.ID != "deny" || m.Observation.Counters.DeniedPackets == 0 || m.Enforcement.Network.TableRemoved != "deleted" {
		t.Fatalf("manifest: %+v", m)
	}
	if m.Enforcement.Network.Status != spec.NetworkEnforced || len(m.Observation.TableDrift) != 0 {
		t.Errorf("network status %q, drift %q: want enforced with no drift", m.Enforcement.Network.Status, m.Observation.TableDrift)
	}
	if !strings.Contains(m.Enforcement.Network.Scope, "host netns") {
		t.Errorf("scope %q: want the cgroup scope in the host netns", m.Enforcement.Network.Scope)
	}
	p.finishedAtPoststop(t, m)
}

// allowExact: only the allowed tuple is reached.
func (p *podmanEnv) allowExact(t *testing.T) {
	p1, seen1 := runListener(t)
	p2, seen2 := runListener(t)
	p.publish(spec.Contract{ID: "exact", Version: 1, Network: spec.Network{Mode: spec.NetworkAllowExact,
		Allow: []spec.AllowRule{{IP: "127.0.0.1", Proto: spec.ProtoTCP, Port: p1}}}})
	out, code := p.run("exact", []string{"--network=host"}, "/bin/sh", "-c",
		fmt.Sprintf("/bin/probe connect tcp 127.0.0.1:%d || exit 3; /bin/probe connect tcp 127.0.0.1:%d && exit 4; exit 0", p1, p2))
	if code != 0 {
		t.Fatalf("podman run: exit %d (3: the allowed tuple was refused, 4: the other port was reached)\n%s", code, out)
	}
	if seen1.Load() != 1 || seen2.Load() != 0 {
		t.Fatalf("allowed server saw %d, the other %d connections", seen1.Load(), seen2.Load())
	}
	_, m := p.lastOperation(t)
	if m.Contract.ID != "exact" || m.Observation.Counters.AllowedPackets == 0 || m.Observation.Counters.DeniedPackets == 0 {
		t.Fatalf("manifest: %+v", m.Observation)
	}
	p.finishedAtPoststop(t, m)
}

// refused: a spec the policy refuses makes `podman run` fail with the
// reason in its output, is a line of refusals.jsonl, and runs nothing.
func (p *podmanEnv) refused(t *testing.T) {
	p.publish(denyAll("deny"))
	ops := func() int { e, _ := os.ReadDir(filepath.Join(p.e.state, "operations")); return len(e) }
	before := ops()
	type refusal struct {
		name, rule string
		base       []string
	}
	cases := []refusal{
		{"capadd", "refused_capability", append([]string{"--cap-add=NET_ADMIN"}, hookFlags...)},
		{"netraw", hooks.ReasonCapNetRaw, []string{"--cgroupns=private", "--security-opt", "mask=/proc/asound:/sys/devices/virtual/powercap"}},
		{"seccomp", "seccomp_weaker", append(append([]string{}, hookFlags...), "--security-opt", "seccomp=unconfined")},
		{"cgroupns", hooks.ReasonCgroupns, []string{"--cgroupns=host", "--cap-drop=NET_RAW", "--security-opt", "mask=/proc/asound:/sys/devices/virtual/powercap"}},
	}
	if h, err := cgroup.Find(); err == nil && !hostfacts.CgroupNsDelegate(hostfacts.MountTable()) {
		// Without nsdelegate clone3 through a directory fd of the bind
		// starts a child in the host's root cgroup, read-only or not.
		// The default profile (RuntimeDefault) returns ENOSYS for clone3,
		// which the rule exempts: the default-allow merge does not.
		cases = append(cases, refusal{"cgbind", specpolicy.RuleCgroupBind, append([]string{"-v", h.Mountpoint + ":/hostcg:ro", "--security-opt", "seccomp=" + p.allowSeccomp}, hookFlags...)})
	}
	for _, c := range cases {
		out, code := p.runBase("refused-"+c.name, c.base, []string{"--network=host"}, "/bin/probe", "sleep", "0")
		if code == 0 || !strings.Contains(out, "gensee: admission refused: "+c.rule+": ") {
			t.Errorf("%s: podman run exit %d, want a failure naming %s:\n%s", c.name, code, c.rule, out)
		}
	}
	// A network namespace a process is already in (here the host's, by
	// path; podman --network container:X names another container's the
	// same way) would share its loopback, abstract sockets and ports.
	netns := occupiedNetns(t)
	if out, code := p.runBase("refused-netns", hookFlags, []string{"--network=ns:" + netns}, "/bin/probe", "sleep", "0"); code == 0 || !strings.Contains(out, "gensee: admission refused: "+hooks.ReasonNetnsInUse+": ") {
		t.Errorf("netns in use: podman run exit %d, want a failure naming %s:\n%s", code, hooks.ReasonNetnsInUse, out)
	}
	if n := ops(); n != before {
		t.Errorf("refused containers left %d operation records", n-before)
	}
	if h, err := cgroup.Find(); err == nil && h.Mountpoint != "/sys/fs/cgroup" {
		// A hybrid host: podman's default cgroup mount (type cgroup, in
		// the container's cgroup namespace) holds the v1 hierarchies
		// only, and clone3 takes no v1 fd; it stays admitted.
		out, code := p.run("cgdefault", []string{"--network=host", "--security-opt", "seccomp=" + p.allowSeccomp}, "/bin/probe", "cgclone", "/sys/fs/cgroup/pids")
		if code != 1 || !strings.Contains(out, "bad file descriptor") {
			t.Errorf("clone3 into a v1 hierarchy of podman's cgroup mount: exit %d, want EBADF\n%s", code, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(p.e.state, "refusals.jsonl"))
	must(t, err)
	if !strings.Contains(string(b), `"reason":"refused_capability"`) || !strings.Contains(string(b), `"runtime":"oci-hooks"`) {
		t.Fatalf("refusals.jsonl:\n%s", b)
	}
}

// productStaged: a structured_result the container writes is gated from
// podman's overlay upperdir, staged, and its sha256 is in the manifest.
func (p *podmanEnv) productStaged(t *testing.T) {
	c := denyAll("products")
	c.Workspace = "/workspace"
	c.Products = []spec.Product{{Class: spec.ClassStructuredResult, Slot: "out/result.json", MaxBytes: 65536, Modes: []string{"0644"}}}
	p.publish(c)
	body := `{"ok":true}`
	out, code := p.run("product", []string{"--network=none"}, "/bin/sh", "-c",
		"mkdir -p /workspace/out && /bin/probe write /workspace/out/result.json '"+body+"'")
	if code != 0 {
		t.Fatalf("podman run: exit %d\n%s", code, out)
	}
	_, m := p.lastOperation(t)
	pr := product(*m, "out/result.json")
	if m.Gate.Verdict != spec.VerdictPass || pr == nil || pr.SHA256 != hexSum([]byte(body)) {
		t.Fatalf("gate %+v, product %+v", m.Gate, pr)
	}
	dir, err := record.Store{Dir: p.e.state}.OperationDir(m.OperationID)
	must(t, err)
	got, err := os.ReadFile(filepath.Join(dir, pr.Staged))
	if err != nil || string(got) != body {
		t.Fatalf("staged product: %q, %v", got, err)
	}
	if m.Enforcement.Network.TableRemoved != "with_netns" || m.Enforcement.Network.AbstractUnix != spec.AbstractUnixNetns {
		t.Errorf("a private netns (--network=none, made by runc): %+v", m.Enforcement.Network)
	}
	p.finishedAtPoststop(t, m)
}

// occupiedNetns is the path of a named network namespace a process of
// the test sleeps in; both go at cleanup.
func occupiedNetns(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("gensee-ito-%d", time.Now().UnixNano()%1e9)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	cmd := exec.Command("ip", "netns", "exec", name, "sleep", "120")
	if err := cmd.Start(); err != nil {
		exec.Command("ip", "netns", "del", name).Run()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Logf("ip netns del %s: %v %s", name, err, out)
		}
	})
	// The sleep is in the namespace once ip has switched and exec'd.
	path := "/var/run/netns/" + name
	want, err := nsfile.IDOfPath(path)
	must(t, err)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got, err := nsfile.IDOfPath(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)); err == nil && got == want {
			return path
		}
		if time.Now().After(deadline) {
			t.Fatal("the sleeper never entered its network namespace")
		}
	}
}
