package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
