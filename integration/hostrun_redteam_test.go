package integration

import (
	"os"
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
