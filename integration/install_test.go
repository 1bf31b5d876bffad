package integration

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// installedBinaries are what make install puts in $(PREFIX)/bin, siblings.
var installedBinaries = []string{"containerd-shim-gensee-v2", "gensee-shim", "gensee-gate-helper", "gensee-runc", "gensee-oci-hook", "gensee-sandbox", "gensee-verifier", "gensee-events", "gensee", "gensee-node"}

// makeInstall runs make install|uninstall DESTDIR=dest PREFIX=/usr from the
// repository root, with the binaries of GENSEE_BIN.
func makeInstall(t *testing.T, target, dest string) string {
	t.Helper()
	top, err := filepath.Abs("..")
	must(t, err)
	cmd := exec.Command("make", "--no-print-directory", "-C", top, target, "DESTDIR="+dest, "PREFIX=/usr", "BIN="+binDir(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", target, err, out)
	}
	return string(out)
}

// treeOf lists every path under dir (relative, sorted), directories with a trailing slash.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	}))
	slices.Sort(out)
	return out
}

// checkInstalledLayout checks what make install DESTDIR=dest PREFIX=/usr put:
// the binaries root-owned siblings only root may write, every file and
// directory root's and not group/other-writable, the kit's paths, the
// hook pointing at the installed hook binary, man pages and completions.
func checkInstalledLayout(t *testing.T, dest string) {
	t.Helper()
	for _, b := range installedBinaries {
		p := filepath.Join(dest, "usr/bin", b)
		st, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		sys := st.Sys().(*syscall.Stat_t)
		if !st.Mode().IsRegular() || st.Mode().Perm() != 0o755 || sys.Uid != 0 || sys.Gid != 0 {
			t.Errorf("%s: mode %v uid %d gid %d, want a regular 0755 file of root:root", p, st.Mode(), sys.Uid, sys.Gid)
		}
	}
	for _, p := range []string{
		"etc/containerd/conf.d/gensee.toml",
		"etc/systemd/system/containerd.service.d/10-gensee.conf",
		"etc/systemd/system/gensee-verify.service",
		"etc/systemd/system/gensee-verify.timer",
		"etc/systemd/system/gensee-analyzer.service",
		"etc/systemd/system/gensee-node.service",
		"etc/gensee/config.toml",
		"usr/share/containers/oci/hooks.d/gensee.json",
		"usr/share/man/man1/gensee.1",
		"usr/share/man/man1/gensee-manifest-show.1",
		"usr/share/man/man1/gensee-boundary-run.1",
		"usr/share/bash-completion/completions/gensee",
		"usr/share/zsh/site-functions/_gensee",
		"usr/share/fish/vendor_completions.d/gensee.fish",
		"usr/share/gensee/install-manifest",
	} {
		if _, err := os.Stat(filepath.Join(dest, p)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	must(t, filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dest {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		if sys.Uid != 0 || st.Mode().Perm()&0o022 != 0 || st.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("%s: mode %v uid %d: want root's, not group/other-writable, no symlink", p, st.Mode(), sys.Uid)
		}
		return nil
	}))
	hook, err := os.ReadFile(filepath.Join(dest, "usr/share/containers/oci/hooks.d/gensee.json"))
	must(t, err)
	if !strings.Contains(string(hook), `"path": "/usr/bin/gensee-oci-hook"`) {
		t.Errorf("hook JSON does not name the installed hook /usr/bin/gensee-oci-hook:\n%s", hook)
	}
	unit, err := os.ReadFile(filepath.Join(dest, "etc/systemd/system/gensee-verify.service"))
	must(t, err)
	if !strings.Contains(string(unit), "ExecStart=/usr/bin/gensee manifest verify") {
		t.Errorf("gensee-verify.service does not run the installed CLI:\n%s", unit)
	}
	for unit, exec := range map[string]string{"gensee-analyzer": "ExecStart=/usr/bin/gensee analyzer serve", "gensee-node": "ExecStart=/usr/bin/gensee-node serve"} {
		b, err := os.ReadFile(filepath.Join(dest, "etc/systemd/system", unit+".service"))
		must(t, err)
		if !strings.Contains(string(b), exec) {
			t.Errorf("%s.service does not run the installed binary (%s):\n%s", unit, exec, b)
		}
	}
	dropin, err := os.ReadFile(filepath.Join(dest, "etc/systemd/system/containerd.service.d/10-gensee.conf"))
	must(t, err)
	if !strings.Contains(string(dropin), "Environment=PATH=/usr/bin:") {
		t.Errorf("containerd drop-in does not put /usr/bin first on PATH:\n%s", dropin)
	}
	man, err := os.ReadFile(filepath.Join(dest, "usr/share/man/man1/gensee-manifest-show.1"))
	must(t, err)
	if !strings.HasPrefix(string(man), `.\"`) || !strings.Contains(string(man), ".TH GENSEE\\-MANIFEST\\-SHOW 1") || !strings.Contains(string(man), "\\-\\-container") {
		t.Errorf("gensee-manifest-show.1 is not the man page of manifest show:\n%s", man)
	}
	for _, p := range []string{"usr/share/bash-completion/completions/gensee", "usr/share/zsh/site-functions/_gensee", "usr/share/fish/vendor_completions.d/gensee.fish"} {
		b, err := os.ReadFile(filepath.Join(dest, p))
		must(t, err)
		if !strings.Contains(string(b), "gensee __complete") {
			t.Errorf("%s is not a gensee completion script:\n%s", p, b)
		}
	}
	out, err := exec.Command(filepath.Join(dest, "usr/bin/gensee"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "gensee ") {
		t.Errorf("installed gensee version: %v\n%s", err, out)
	}
}

// TestMakeInstall: make install DESTDIR=<dir> PREFIX=/usr lays out the
// binaries, the kit, man pages and completions with root's modes; a private
// containerd whose PATH has only the installed bin dir (and runc) runs a
// gensee container through the installed shim, front and full shim alike;
// make uninstall leaves nothing. A second round with an operator config in
// place keeps it through install and uninstall.
func TestMakeInstall(t *testing.T) {
	roottest.Require(t)
	gbin := binDir(t)
	for _, b := range append([]string{"containerd", "ctr", "runc"}, installedBinaries...) {
		if _, err := os.Stat(filepath.Join(gbin, b)); err != nil {
			t.Fatalf("%s missing in %s: run `make deps build` first", b, gbin)
		}
	}
	dir, err := os.MkdirTemp("/var/lib", "gensee-it-install-")
	must(t, err)
	e := &env{t: t, dir: dir, bin: gbin, sock: filepath.Join(dir, "c.sock"), state: filepath.Join(dir, "gensee-state")}
	t.Cleanup(e.stop)

	dest := filepath.Join(dir, "dest")
	must(t, os.Mkdir(dest, 0o755))
	makeInstall(t, "install", dest)
	checkInstalledLayout(t, dest)
	if t.Failed() {
		t.FailNow()
	}

	// The daemon's PATH: the installed bin dir, then a directory with runc only, so
	// no other gensee binary can be the one that runs.
	runcOnly := filepath.Join(dir, "runc-only")
	must(t, os.Mkdir(runcOnly, 0o755))
	must(t, os.Symlink(filepath.Join(gbin, "runc"), filepath.Join(runcOnly, "runc")))
	e.key, e.anKey = newKey(t), newKey(t)
	e.writeOperatorConfig("")
	e.publish(catalogOf([]spec.Contract{denyAll("offline")}, selector("it-install", map[string]string{"build": "offline"}, "offline")))
	e.startDaemonPath(filepath.Join(dest, "usr/bin") + ":" + runcOnly + ":/usr/sbin:/usr/bin:/sbin:/bin")
	e.importImage()

	out, code := e.run("it-install", "installed-rm", nil, "/bin/sh", "-c", "echo ran")
	if code != 0 || !strings.Contains(out, "ran") {
		t.Fatalf("ctr run through the installed shim: exit %d\n%s", code, out)
	}
	if m := e.manifest("it-install", "installed-rm"); m.Contract.ID != "offline" {
		t.Fatalf("manifest contract %q, want offline", m.Contract.ID)
	}
	// The long-lived shim is the installed gensee-shim, started by the installed front.
	e.ctr("it-install", "run", "-d", "--runtime", runtimeName, "--runtime-config-path", e.cfgPath, e.image, "installed-d", "/bin/sleep", "60")
	want := filepath.Join(dest, "usr/bin/gensee-shim")
	var exes []string
	deadline := time.Now().Add(10 * time.Second)
	for len(exes) == 0 && time.Now().Before(deadline) {
		exes = shimExes(e.sock)
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.Contains(exes, want) {
		t.Errorf("shim processes of this daemon run %v, want %s", exes, want)
	}
	e.ctr("it-install", "tasks", "kill", "-s", "SIGKILL", "installed-d")
	waitStopped(e, "it-install", "installed-d")
	e.ctr("it-install", "tasks", "delete", "installed-d")
	e.ctr("it-install", "containers", "delete", "installed-d")

	makeInstall(t, "uninstall", dest)
	if left := treeOf(t, dest); len(left) != 0 {
		t.Errorf("make uninstall left %v", left)
	}

	// Round two: an operator config already there is neither overwritten nor removed.
	dest2 := filepath.Join(dir, "dest2")
	cfg := filepath.Join(dest2, "etc/gensee/config.toml")
	must(t, os.MkdirAll(filepath.Dir(cfg), 0o755))
	mine := "# the operator's own\nstate_dir = \"/srv/gensee\"\n"
	must(t, os.WriteFile(cfg, []byte(mine), 0o600))
	out2 := makeInstall(t, "install", dest2)
	if b, _ := os.ReadFile(cfg); string(b) != mine {
		t.Errorf("make install overwrote the operator config:\n%s\n%s", b, out2)
	}
	makeInstall(t, "install", dest2) // again: idempotent
	makeInstall(t, "uninstall", dest2)
	if b, _ := os.ReadFile(cfg); string(b) != mine {
		t.Errorf("make uninstall removed or changed the operator config (%q)", b)
	}
	if left := treeOf(t, dest2); !slices.Equal(left, []string{"etc/", "etc/gensee/", "etc/gensee/config.toml"}) {
		t.Errorf("make uninstall left %v, want only the operator config", left)
	}

	// Round three: a config install created but the operator edited since stays.
	dest3 := filepath.Join(dir, "dest3")
	must(t, os.Mkdir(dest3, 0o755))
	makeInstall(t, "install", dest3)
	edited := filepath.Join(dest3, "etc/gensee/config.toml")
	f, err := os.OpenFile(edited, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	fmt.Fprintln(f, "# edited")
	must(t, f.Close())
	makeInstall(t, "uninstall", dest3)
	if left := treeOf(t, dest3); !slices.Equal(left, []string{"etc/", "etc/gensee/", "etc/gensee/config.toml"}) {
		t.Errorf("make uninstall left %v, want only the edited config", left)
	}
}

// shimExes lists the executables of the processes whose command line names sock.
func shimExes(sock string) []string {
	var exes []string
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		if _, err := strconv.Atoi(en.Name()); err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", en.Name(), "cmdline"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Split(bufio.ScanLines)
		var cmdline strings.Builder
		for sc.Scan() {
			cmdline.WriteString(sc.Text())
		}
		f.Close()
		if !strings.Contains(cmdline.String(), sock) || strings.Contains(cmdline.String(), "--config") {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", en.Name(), "exe")); err == nil {
			exes = append(exes, exe)
		}
	}
	return exes
}
