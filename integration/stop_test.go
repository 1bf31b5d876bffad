package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// stop tears the environment down and then checks that nothing is left:
// no task, shim, mount, gensee table or cgroup of the test.
func (e *env) stop() {
	t := e.t
	if e.daemon != nil {
		for ns := range e.imported {
			e.removeAll(ns)
		}
		e.daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { e.daemon.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-e.daemon.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	e.killShims()
	for _, m := range mountsUnder(e.dir) {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			t.Errorf("leak: mount %s left and not unmountable: %v", m, err)
		} else {
			t.Errorf("leak: mount %s was left behind", m)
		}
	}
	if t.Failed() {
		if log, err := os.ReadFile(filepath.Join(e.dir, "containerd.log")); err == nil {
			t.Logf("containerd log (tail):\n%s", tail(log, 6000))
		}
	}
	if os.Getenv("GENSEE_KEEP") == "" {
		os.RemoveAll(e.dir)
	}
	if tables := hostTables(); len(tables) > 0 {
		t.Errorf("leak: gensee tables in the host netns: %v", tables)
	}
	for ns := range e.imported {
		removeCgroupParent(t, "/"+ns)
	}
}

// removeAll kills and deletes every task and container of namespace ns.
func (e *env) removeAll(ns string) {
	out, _ := e.ctrErr(ns, "tasks", "ls", "-q")
	for _, id := range strings.Fields(out) {
		e.ctrErr(ns, "tasks", "kill", "-a", "-s", "SIGKILL", id)
		e.ctrErr(ns, "tasks", "delete", "-f", id)
	}
	out, _ = e.ctrErr(ns, "containers", "ls", "-q")
	for _, id := range strings.Fields(out) {
		e.ctrErr(ns, "containers", "delete", id)
	}
}

// killShims ends any shim of this daemon still running.
func (e *env) killShims() {
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		cmdline, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if (strings.Contains(string(cmdline), "containerd-shim") || strings.Contains(string(cmdline), "gensee-shim")) && strings.Contains(string(cmdline), e.sock) {
			e.t.Errorf("leak: shim %s still running after the daemon stopped: %q", en.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
			if pid, err := strconv.Atoi(en.Name()); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// mountsUnder lists mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	infos, err := mountinfo.GetMounts(func(m *mountinfo.Info) (bool, bool) {
		return !strings.HasPrefix(m.Mountpoint, dir+"/"), false
	})
	if err != nil {
		return nil
	}
	var ms []string
	for _, m := range infos {
		ms = append(ms, m.Mountpoint)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ms)))
	return ms
}

// hostTables lists gensee tables in the host netns.
func hostTables() []string {
	out, _ := exec.Command("nft", "list", "tables").Output()
	return genseeTables(out)
}

// genseeTables picks the gensee tables out of `nft list tables` output.
func genseeTables(out []byte) []string {
	var ts []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "gensee") {
			ts = append(ts, strings.TrimSpace(l))
		}
	}
	return ts
}

// removeCgroupParent removes the parent cgroup runc made for the tasks of
// one namespace (ctr: /<namespace>) in every cgroup hierarchy, v1 and v2: the
// daemon never removes it. A child left below it is a leaked container
// cgroup and fails the test.
func removeCgroupParent(t testing.TB, parent string) {
	for _, mnt := range cgroupMounts() {
		d := filepath.Join(mnt, strings.TrimPrefix(parent, "/"))
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, en := range ents {
			if en.IsDir() {
				t.Errorf("leak: cgroup %s/%s left", d, en.Name())
				os.Remove(filepath.Join(d, en.Name()))
			}
		}
		if err := os.Remove(d); err != nil {
			t.Errorf("remove cgroup parent %s: %v", d, err)
		}
	}
}

// cgroupMounts lists the mount points of every cgroup hierarchy.
func cgroupMounts() []string {
	infos, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range infos {
		out = append(out, m.Mountpoint)
	}
	return out
}
