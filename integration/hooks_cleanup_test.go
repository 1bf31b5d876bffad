package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/hooks"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// TestHooksMonitorLoss: what a container's boundary does when its monitor
// process dies or its table is changed while it runs.
func TestHooksMonitorLoss(t *testing.T) {
	p := startPodman(t, denyAll("deny"))
	t.Run("OrphanDrained", func(t *testing.T) { p.orphanDrained(t) })
	t.Run("Drift", func(t *testing.T) { p.drift(t) })
}

// orphanDrained: the monitor of a running container is killed; the next
// hook's orphan cleanup kills the container's processes, then removes its
// table, and writes a manifest that says the monitor died.
func (p *podmanEnv) orphanDrained(t *testing.T) {
	id, mk := p.runDetached(t, "orphan")
	pid := p.containerPid(t, "orphan")
	if mk.Cgroup == "" || mk.CgroupID == 0 {
		t.Fatalf("the marker names no cgroup: %+v", mk)
	}
	must(t, syscall.Kill(mk.Monitor.PID, syscall.SIGKILL))
	waitGone(t, mk.Monitor.PID)
	if !hasTable(mk.Table) {
		t.Fatalf("table %s gone with the monitor, before any cleanup", mk.Table)
	}
	if !running(pid) {
		t.Fatalf("the container's init %d died with its monitor", pid)
	}
	// The next container's createRuntime cleans the orphan up.
	if out, code := p.run("next", []string{"--network=host"}, "/bin/true"); code != 0 {
		t.Fatalf("podman run after the monitor died: exit %d\n%s", code, out)
	}
	waitGone(t, pid)
	if hasTable(mk.Table) {
		t.Errorf("table %s left after the cleanup", mk.Table)
	}
	m := p.manifestOf(id)
	n := m.Enforcement.Network
	if n.Status != spec.NetworkUnwatched || n.TableRemoved != "deleted" || m.Gate.Verdict != spec.VerdictNotRun ||
		m.Drained < 1 || m.Observation.DeniedAttempts.Complete || m.Observation.Counters.Error == "" {
		t.Fatalf("manifest of the cleaned operation: status %q removed %q verdict %q drained %d attempts complete %v counters %+v",
			n.Status, n.TableRemoved, m.Gate.Verdict, m.Drained, m.Observation.DeniedAttempts.Complete, m.Observation.Counters)
	}
	if !slices.ContainsFunc(m.Enforcement.NotEnforced, func(s string) bool {
		return strings.HasPrefix(s, "monitor died:") && strings.Contains(s, "drained by the cleanup")
	}) {
		t.Errorf("not_enforced does not say the monitor died and the cleanup drained: %q", m.Enforcement.NotEnforced)
	}
	if _, err := os.Stat(filepath.Join(p.e.state, "ocihooks", m.OperationID+".json")); err == nil {
		t.Errorf("marker of operation %s left", m.OperationID)
	}
	_, next := p.lastOperation(t)
	p.finishedAtPoststop(t, next)
}

// drift: a table flushed from the host while its container runs makes the
// manifest's network status drift_detected, the drift listed.
func (p *podmanEnv) drift(t *testing.T) {
	id, mk := p.runDetached(t, "drift")
	if out, err := exec.Command("nft", "flush", "table", "inet", mk.Table).CombinedOutput(); err != nil {
		t.Fatalf("nft flush table %s: %v\n%s", mk.Table, err, out)
	}
	time.Sleep(2 * time.Second) // the table watcher reads back within 2 s
	p.podman("stop", "--time", "0", "drift")
	p.podman("rm", "drift")
	m := p.manifestOf(id)
	if m.Enforcement.Network.Status != spec.NetworkDriftDetected || len(m.Observation.TableDrift) == 0 {
		t.Fatalf("network status %q, drift %q: want drift_detected", m.Enforcement.Network.Status, m.Observation.TableDrift)
	}
	p.finishedAtPoststop(t, m)
}

// orphanMarker is the part of a hook operation's marker these tests read.
type orphanMarker struct {
	OperationID string `json:"operation_id"`
	Table       string `json:"table"`
	Cgroup      string `json:"cgroup"`
	CgroupID    uint64 `json:"cgroup_id"`
	Monitor     struct {
		PID int `json:"pid"`
	} `json:"monitor"`
}

// runDetached starts a bound container on the host network that sleeps,
// and returns its id and its operation's marker.
func (p *podmanEnv) runDetached(t *testing.T, name string) (string, orphanMarker) {
	t.Helper()
	args := append([]string{"run", "-d", "--name", name, "--cgroup-parent", p.cgroupParent, "--annotation", boundaryAnnotation}, hookFlags...)
	args = append(args, "--network=host", p.e.image, "/bin/probe", "sleep", "600")
	out, stdout, code := p.podmanSplit(args...)
	if code != 0 {
		t.Fatalf("podman run -d: exit %d\n%s", code, out)
	}
	id := strings.TrimSpace(stdout)
	op, err := record.Store{Dir: p.e.state}.Lookup(hooks.Namespace, id)
	must(t, err)
	b, err := os.ReadFile(filepath.Join(p.e.state, "ocihooks", op+".json"))
	must(t, err)
	var mk orphanMarker
	must(t, json.Unmarshal(b, &mk))
	return id, mk
}

// containerPid is the host pid of a running container's init.
func (p *podmanEnv) containerPid(t *testing.T, name string) int {
	t.Helper()
	_, out, code := p.podmanSplit("inspect", "--format", "{{.State.Pid}}", name)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if code != 0 || err != nil || pid <= 0 {
		t.Fatalf("pid of %s: %q (exit %d)", name, out, code)
	}
	return pid
}

// waitGone waits (10 s at most) until pid no longer runs (gone, or a
// zombie its new parent has not reaped yet).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func hasTable(name string) bool {
	return slices.ContainsFunc(hostTables(), func(l string) bool { return strings.HasSuffix(l, " "+name) })
}

// stop removes every container and image of the private podman, unmounts
// what its storage left mounted and the test dir, and fails the test for
// anything the boundary left behind: a gensee table in the host netns, a
// monitor process, a container cgroup, a mount.
func (p *podmanEnv) stop() {
	t := p.e.t
	dir := p.e.dir
	if p.podmanEnv != nil {
		p.podmanCode("rm", "--all", "--force", "--time", "0")
		if _, out, code := p.podmanSplit("ps", "--all", "--quiet"); code == 0 && strings.TrimSpace(out) != "" {
			t.Errorf("leak: podman containers left: %s", out)
		}
		p.podmanCode("rmi", "--all", "--force")
	}
	// A monitor finishes within its grace once its container is gone.
	deadline := time.Now().Add(10 * time.Second)
	for len(p.monitors()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range p.monitors() {
		t.Errorf("leak: monitor process %d left", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, l := range hostTables() {
		if f := strings.Fields(l); p.ownsTable(f[len(f)-1]) {
			t.Errorf("leak: table %s left in the host netns", l)
			exec.Command("nft", "delete", "table", "inet", f[len(f)-1]).Run()
		}
	}
	for _, mnt := range cgroupMounts() {
		d := filepath.Join(mnt, strings.TrimPrefix(p.cgroupParent, "/"))
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, en := range ents {
			if !en.IsDir() {
				continue
			}
			if en.Name() != "conmon" { // conmon's own cgroup, which podman never removes
				t.Errorf("leak: cgroup %s/%s left", d, en.Name())
			}
			os.Remove(filepath.Join(d, en.Name()))
		}
		os.Remove(d)
	}
	mounts := mountsUnder(dir)
	for _, m := range mounts {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	for _, m := range mountsUnder(dir) {
		t.Errorf("leak: mount %s left", m)
	}
	os.RemoveAll(dir)
}

// ownsTable: the table belongs to an operation of this test's state dir.
func (p *podmanEnv) ownsTable(name string) bool {
	ops, _ := os.ReadDir(filepath.Join(p.e.state, "operations"))
	for _, op := range ops {
		if strings.HasPrefix(name, "gensee_") && strings.HasPrefix(op.Name(), strings.TrimPrefix(name, "gensee_")) {
			return true
		}
	}
	return false
}

// monitors are the live monitor processes of this test's operator config.
func (p *podmanEnv) monitors() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := string(b)
		if strings.Contains(cmd, "gensee-oci-hook\x00monitor") && strings.Contains(cmd, p.e.cfgPath) {
			if pid, err := strconv.Atoi(en.Name()); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
