package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/spec"
)

// sudoEnv is a throwaway account that may run gensee through sudo, and the
// default operator config pointing at the test's trust anchor and state.
type sudoEnv struct {
	*runEnv
	name     string
	uid, gid int
	home     string // the account's own 0700 directory (its manifests)
}

// startSudoEnv creates the account (useradd), a sudoers drop-in for it
// (validated with visudo -cf) and /etc/gensee/config.toml (only when
// absent: an operator's own config is never replaced, the test skips);
// t.Cleanup removes all three, pass or fail.
func startSudoEnv(t *testing.T) *sudoEnv {
	t.Helper()
	h := startRunEnv(t, resultContract())
	for _, tool := range []string{"sudo", "visudo", "useradd", "userdel", "runuser"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing: run hack/deps.sh (make deps)", tool)
		}
	}
	if _, err := os.Lstat(config.DefaultPath); err == nil {
		t.Skipf("%s exists: this test installs its own operator config there and never replaces one", config.DefaultPath)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "gsit" + hex.EncodeToString(rnd[:])

	// The account.
	if out, err := exec.Command("useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", "--user-group", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "--force", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	must(t, err)
	s := &sudoEnv{runEnv: h, name: name}
	s.uid, _ = strconv.Atoi(u.Uid)
	s.gid, _ = strconv.Atoi(u.Gid)

	// The drop-in: gensee as root, GENSEE_CONFIG kept (so the test can show
	// it is refused), no password.
	gensee := filepath.Join(h.bin, "gensee")
	rule := fmt.Sprintf("Defaults:%s env_keep += \"GENSEE_CONFIG SUDO_UID\"\n%s ALL=(root) NOPASSWD: %s\n", name, name, gensee)
	draft := filepath.Join(h.dir, "sudoers")
	must(t, os.WriteFile(draft, []byte(rule), 0o440))
	if out, err := exec.Command("visudo", "-cf", draft).CombinedOutput(); err != nil {
		t.Fatalf("visudo -cf: %v: %s", err, out)
	}
	dropIn := "/etc/sudoers.d/" + name // no dot: sudo skips names with one
	must(t, os.WriteFile(dropIn, []byte(rule), 0o440))
	t.Cleanup(func() {
		if err := os.Remove(dropIn); err != nil {
			t.Errorf("remove %s: %v", dropIn, err)
		}
	})

	// The operator config at the default path: the test's anchor and state.
	dir := filepath.Dir(config.DefaultPath)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		must(t, os.Mkdir(dir, 0o755))
		t.Cleanup(func() {
			if err := os.Remove(dir); err != nil {
				t.Errorf("remove %s: %v", dir, err)
			}
		})
	}
	cfg, err := os.ReadFile(h.cfgPath)
	must(t, err)
	f, err := os.OpenFile(config.DefaultPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	must(t, err)
	t.Cleanup(func() {
		if err := os.Remove(config.DefaultPath); err != nil {
			t.Errorf("remove %s: %v", config.DefaultPath, err)
		}
	})
	_, err = f.Write(cfg)
	must(t, errors.Join(err, f.Close()))

	// A selector for the account, with a safe default (no products: the
	// gate passes whatever the command leaves).
	c := spec.Contract{ID: "host-contract", Version: 1, Deadline: "2m", Network: spec.Network{Mode: spec.NetworkDenyAll}}
	h.publish(spec.Catalog{
		Contracts: map[string]spec.Contract{c.ID: c},
		Analyzers: []spec.Analyzer{{ID: "ref-analyzer", Models: []string{"ref-model-1"}, Classes: []string{"build"},
			MinConfidenceBP: 8000, MinMarginBP: 500, MaxLifetime: "1h"}},
		Selectors: []spec.Selector{{ID: "host-sudo", Match: spec.SelectorMatch{Runtime: "host", User: name},
			Routes: map[string]string{"build": c.ID}, SafeDefault: c.ID}},
	})

	s.home = filepath.Join(h.dir, "home-"+name)
	must(t, os.Mkdir(s.home, 0o700))
	must(t, os.Chown(s.home, s.uid, s.gid))
	return s
}

// sudo runs `runuser -u NAME -- [env KV...] sudo -n gensee boundary run
// flags -- argv` and returns the exit status, stdout and stderr.
func (s *sudoEnv) sudo(env []string, flags []string, argv ...string) (int, string, string) {
	s.t.Helper()
	args := []string{"-u", s.name, "--"}
	if len(env) > 0 {
		args = append(append(args, "env"), env...)
	}
	args = append(args, "sudo", "-n", filepath.Join(s.bin, "gensee"), "boundary", "run")
	args = append(append(append(args, flags...), "--"), argv...)
	cmd := exec.Command("runuser", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = "/"
	err := cmd.Run()
	if cmd.ProcessState == nil {
		s.t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestHostRunSudo: through sudo from an unprivileged account, the command
// runs as that account, the manifest is written as it (owned by it, never
// through a symlink, never over a file it could not write), and the
// account can choose neither the operator config nor the account.
func TestHostRunSudo(t *testing.T) {
	s := startSudoEnv(t)
	ws := s.workspace(nil)
	uidLine := strconv.Itoa(s.uid) + "\n"

	// The command runs as the account; the manifest is its file. SUDO_UID
	// (kept by the drop-in) changes nothing.
	mfile := filepath.Join(s.home, "manifest.json")
	code, out, errs := s.sudo([]string{"SUDO_UID=0"}, []string{"--workspace", ws, "--manifest", mfile}, "sh", "-c", "id -u; mkdir -p out && id -u > out/uid")
	if code != 0 || out != uidLine {
		t.Fatalf("exit %d, stdout %q (want %q): %s", code, out, uidLine, errs)
	}
	st, err := os.Lstat(mfile)
	must(t, err)
	if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != s.uid || int(sys.Gid) != s.gid || !st.Mode().IsRegular() {
		t.Errorf("manifest owned by %d:%d mode %v, want a regular file of %d:%d", sys.Uid, sys.Gid, st.Mode(), s.uid, s.gid)
	}
	b, err := os.ReadFile(mfile)
	must(t, err)
	m, err := spec.ParseManifest(b)
	must(t, err)
	if m.Host == nil || m.Host.UID != uint32(s.uid) {
		t.Errorf("manifest host %+v, want uid %d", m.Host, s.uid)
	}

	// --manifest -: the manifest follows the command's own output on stdout.
	code, out, errs = s.sudo(nil, []string{"--workspace", ws, "--manifest", "-"}, "sh", "-c", "echo from-the-command")
	rest, ok := strings.CutPrefix(out, "from-the-command\n")
	if code != 0 || !ok {
		t.Fatalf("--manifest -: exit %d, stdout %q: %s", code, out, errs)
	}
	if _, err := spec.ParseManifest([]byte(rest)); err != nil {
		t.Errorf("--manifest -: what follows the command's output is no manifest: %v\n%s", err, rest)
	}

	// A root 0600 file the account cannot write is not replaced (the run
	// still succeeds; the copy is a warning).
	secret := filepath.Join(s.dir, "root-secret")
	must(t, os.WriteFile(secret, []byte("root only\n"), 0o600))
	code, _, errs = s.sudo(nil, []string{"--workspace", ws, "--manifest", secret}, "true")
	if code != 0 || !strings.Contains(errs, "copy the manifest to "+secret) {
		t.Errorf("manifest over a root file: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root only\n" {
		t.Errorf("the root 0600 file was replaced: %q", b)
	}
	if st, _ := os.Stat(secret); st.Mode().Perm() != 0o600 {
		t.Errorf("the root file's mode changed: %v", st.Mode())
	}

	// A symlink is not followed, even to a file the account may write.
	target := filepath.Join(s.home, "target")
	must(t, os.WriteFile(target, []byte("untouched\n"), 0o644))
	must(t, os.Chown(target, s.uid, s.gid))
	link := filepath.Join(s.home, "link")
	must(t, os.Symlink(target, link))
	code, _, errs = s.sudo(nil, []string{"--workspace", ws, "--manifest", link}, "true")
	if code != 0 || !strings.Contains(errs, "copy the manifest to "+link) || !strings.Contains(errs, "symlink") {
		t.Errorf("manifest through a symlink: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(target); string(b) != "untouched\n" {
		t.Errorf("the symlink was followed: %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v", err)
	}

	// The account chooses neither the operator config nor the account.
	witness := filepath.Join(s.dir, "ran")
	touch := []string{"sh", "-c", "touch " + witness}
	for _, c := range []struct {
		name  string
		env   []string
		flags []string
		want  string
	}{
		{"--config", nil, []string{"--config", s.cfgPath, "--workspace", ws}, "admission refused: operator_config: --config: "},
		{"$GENSEE_CONFIG", []string{"GENSEE_CONFIG=" + s.cfgPath}, []string{"--workspace", ws}, "admission refused: operator_config: $GENSEE_CONFIG: "},
		{"--catalog", nil, []string{"--catalog", filepath.Join(s.dir, "etc", "other.json"), "--workspace", ws}, "admission refused: catalog: --catalog: "},
		{"--user", nil, []string{"--user", "nobody", "--workspace", ws}, "admission refused: user: --user "},
		{"--user root", nil, []string{"--user", "root", "--workspace", ws}, "admission refused: user: --user "},
		{"--observation root 0600", nil, []string{"--observation", secret, "--workspace", ws}, "read observation " + secret},
	} {
		code, _, errs := s.sudo(c.env, c.flags, touch...)
		if code != 125 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d (want 125), stderr lacks %q: %s", c.name, code, c.want, errs)
		}
		if strings.Contains(errs, "root only") {
			t.Errorf("%s: stderr echoes a root file: %s", c.name, errs)
		}
		if _, err := os.Lstat(witness); err == nil {
			t.Fatalf("%s: the command ran", c.name)
		}
	}
}
