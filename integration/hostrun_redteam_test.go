package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

// Findings of the cold red team against host runs, each tried through the
// real CLI with a host control where the attack works outside the run.

// TestHostRunOtherProcfs: a proc mounted outside /proc (a schroot or
// debootstrap chroot's /srv/chroot/proc) shows no host process inside the
// run: the view covers it with an empty read-only tmpfs and the manifest
// lists it as masked.
func TestHostRunOtherProcfs(t *testing.T) {
	waitQuiet(t)
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	chroot := filepath.Join(h.dir, "chroot")
	procDir := filepath.Join(chroot, "proc")
	must(t, os.MkdirAll(procDir, 0o755))
	must(t, os.Chmod(chroot, 0o755))
	must(t, unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""))
	t.Cleanup(func() {
		if err := unix.Unmount(procDir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", procDir, err)
		}
	})
	me := strconv.Itoa(os.Getpid())
	// Control: outside the run, the mount shows this test's own pid.
	ents, err := os.ReadDir(procDir)
	must(t, err)
	if !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == me }) {
		t.Fatalf("control: %s does not show pid %s", procDir, me)
	}
	ws := h.workspace(nil)
	r := h.run(hostNobody, []string{"--workspace", ws}, "sh", "-c", "ls -a "+procDir+"; echo end")
	if r.code != 0 || r.manifest == nil {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	names := strings.Fields(r.stdout)
	if slices.Contains(names, me) || slices.Contains(names, "1") || slices.Contains(names, "self") {
		t.Errorf("the run lists host processes in %s: %q", procDir, names)
	}
	if !slices.Equal(names, []string{".", "..", "end"}) {
		t.Errorf("the run's %s is not empty: %q", procDir, names)
	}
	sb := r.manifest.Host.Sandbox
	if sb == nil || !slices.ContainsFunc(sb.Masked, func(m string) bool { return strings.HasPrefix(m, procDir+" (proc") }) {
		t.Errorf("manifest's masked list does not name %s: %+v", procDir, sb)
	}
}

// TestHostRunStateDirFull: a command that fills the state dir's file
// system through the staged workspace (its writes reach the upper dir with
// root's credentials, root's reserved blocks included) still gets its
// manifest written: the exit path writes it into space reserved before the
// command started. The state dir is a small loop-mounted ext4 without a
// root reserve, so the fill takes every block whatever the kernel's
// credentials for overlay writes.
func TestHostRunStateDirFull(t *testing.T) {
	waitQuiet(t)
	h := startRunEnv(t, resultContract())
	loopExt4(t, filepath.Join(h.dir, "state.img"), h.state, 32)
	ws := h.workspace(nil)
	r := h.run(hostNobody, []string{"--workspace", ws}, "sh", "-c",
		"mkdir -p out; dd if=/dev/zero of=out/fill bs=1M 2>/dev/null; i=0; while echo x >out/f$i 2>/dev/null; do i=$((i+1)); done; "+
			"while head -c 1024 /dev/zero >>out/fill 2>/dev/null; do :; done; df -k . >&2; df -i . >&2; echo filled")
	if r.manifest == nil || r.code == 122 {
		t.Fatalf("exit %d and no manifest after the state dir filled up: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "filled") {
		t.Fatalf("the command did not run to its end: %q %s", r.stdout, r.stderr)
	}
	t.Logf("exit %d, gate %+v; the command's df after the fill: %s", r.code, r.manifest.Gate, r.stderr)
	if r.manifest.Gate.Verdict == "" {
		t.Error("the manifest records no gate verdict")
	}
	if !slices.ContainsFunc(r.manifest.Enforcement.NotEnforced, func(s string) bool { return strings.Contains(s, "no quota") }) {
		t.Errorf("not_enforced does not declare the unbounded upper dir: %q", r.manifest.Enforcement.NotEnforced)
	}
}

// loopExt4 makes an ext4 image of mib MiB at img and mounts it (through a
// loop device of its own) at dir; both are undone at cleanup, pass or fail.
func loopExt4(t *testing.T, img, dir string, mib int) {
	t.Helper()
	f, err := os.Create(img)
	must(t, err)
	must(t, f.Truncate(int64(mib)<<20))
	f.Close()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		t.Fatalf("losetup: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	must(t, os.MkdirAll(dir, 0o711))
	must(t, unix.Mount(dev, dir, "ext4", 0, ""))
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	must(t, os.Chmod(dir, 0o711))
}

// TestHostRunRelativeSocket: a host process that bound "rel.sock" relative
// to its cwd (/proc/net/unix lists it so) has it masked at the path it
// names in the host's view; a socket renamed after its bind is listed in
// /proc/net/unix at its old path and is not claimed as masked.
func TestHostRunRelativeSocket(t *testing.T) {
	waitQuiet(t)
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	dir := filepath.Join(h.dir, "socks")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.Chmod(dir, 0o755))
	// The helper's cwd is dir while it binds and after, as a daemon's is.
	helper := exec.Command("sh", "-c", `exec perl -MIO::Socket::UNIX -e 'my $s = IO::Socket::UNIX->new(Local => "rel.sock", Listen => 1) or die $!; my $r = IO::Socket::UNIX->new(Local => "old.sock", Listen => 1) or die $!; rename "old.sock", "renamed.sock" or die $!; print "ready\n"; $| = 1; sleep 600'`)
	helper.Dir = dir
	out, err := helper.StdoutPipe()
	must(t, err)
	must(t, helper.Start())
	t.Cleanup(func() { helper.Process.Kill(); helper.Wait() })
	buf := make([]byte, 6)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("the helper did not bind: %v %q", err, buf)
	}
	rel, renamed := filepath.Join(dir, "rel.sock"), filepath.Join(dir, "renamed.sock")
	// Control: both are sockets on the host, and the host's table lists the
	// relative one as bound and the renamed one at its old path.
	for _, p := range []string{rel, renamed} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Fatalf("control: %s is not a socket: %v", p, err)
		}
	}
	// The helper's own view: a test thread may sit in another netns.
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/unix", helper.Process.Pid)); !strings.Contains(string(b), " rel.sock\n") || !strings.Contains(string(b), " old.sock\n") {
		t.Fatalf("control: /proc/net/unix lists neither rel.sock nor old.sock relative")
	}
	ws := h.workspace(nil)
	r := h.run(hostNobody, []string{"--workspace", ws}, "sh", "-c", fmt.Sprintf("test -S %s && echo rel-open; test -e %s && echo rel-present; echo end", rel, rel))
	if r.code != 0 || r.manifest == nil {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "rel-open") || !strings.Contains(r.stdout, "rel-present") {
		t.Errorf("the relative-bound socket is not masked in the run: %q", r.stdout)
	}
	masked := strings.Join(r.manifest.Host.Sandbox.Masked, "\n")
	if !strings.Contains(masked, rel) {
		t.Errorf("the manifest does not list %s as masked:\n%s", rel, masked)
	}
	if strings.Contains(masked, "old.sock") || strings.Contains(masked, "renamed.sock") {
		t.Errorf("the manifest claims the renamed socket as masked:\n%s", masked)
	}
}
