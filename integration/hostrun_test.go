package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/shim/hostrun/inner"
	"github.com/gensee/gensee/spec"
)

// Host runs go through the built gensee binary as root naming the account
// with --user (root itself never runs the command; SUDO_UID is ignored):
// the command runs as nobody (65534), or as uid 1234 (no passwd entry) for
// the selector without a safe_default. The sudo path is in
// hostrun_sudo_test.go.
const (
	hostNobody = "65534"
	hostStrict = "1234"
)

// runEnv is the trust material and state dir of host-run tests: no
// containerd, the same operator config shape.
type runEnv struct {
	*env
}

func startRunEnv(t *testing.T, contract spec.Contract) *runEnv {
	t.Helper()
	roottest.Require(t)
	bin := binDir(t)
	if _, err := os.Stat(filepath.Join(bin, "gensee")); err != nil {
		t.Fatalf("gensee missing in %s: run `make build` first", bin)
	}
	dir, err := os.MkdirTemp("/var/lib", "gensee-host-it-")
	must(t, err)
	must(t, os.Chmod(dir, 0o711)) // the command (nobody) reaches its workspace below
	e := &env{t: t, dir: dir, bin: bin, state: filepath.Join(dir, "state")}
	t.Cleanup(func() { hostLeakCheck(t, dir); os.RemoveAll(dir) })
	e.key, e.anKey = newKey(t), newKey(t)
	e.writeOperatorConfig("")
	contract.ID, contract.Version = "host-contract", 1
	if contract.Deadline == "" {
		contract.Deadline = "2m"
	}
	e.publish(spec.Catalog{
		Contracts: map[string]spec.Contract{contract.ID: contract},
		Analyzers: []spec.Analyzer{{ID: "ref-analyzer", Models: []string{"ref-model-1"}, Classes: []string{"build", "fetch"},
			MinConfidenceBP: 8000, MinMarginBP: 500, MaxLifetime: "1h"}},
		Selectors: []spec.Selector{
			{ID: "host-nobody", Match: spec.SelectorMatch{Runtime: "host", User: "nobody"},
				Routes: map[string]string{"build": contract.ID}, SafeDefault: contract.ID},
			{ID: "host-strict", Match: spec.SelectorMatch{Runtime: "host", User: hostStrict},
				Routes: map[string]string{"build": contract.ID}},
		},
	})
	return &runEnv{env: e}
}

var wsSeq atomic.Int32

// workspace makes a fresh workspace (0777, so nobody may write its staged
// copy) holding files.
func (h *runEnv) workspace(files map[string]string) string {
	h.t.Helper()
	ws := filepath.Join(h.dir, fmt.Sprintf("ws%d", wsSeq.Add(1)))
	must(h.t, os.Mkdir(ws, 0o777))
	must(h.t, os.Chmod(ws, 0o777))
	for p, c := range files {
		must(h.t, os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755))
		must(h.t, os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644))
	}
	return ws
}

// hostResult is one boundary run.
type hostResult struct {
	code     int
	stdout   string // the command's (gensee passes its stdout file on)
	stderr   string
	manifest *spec.Manifest // from --manifest; nil when none was written
	mfile    string
}

// run runs gensee boundary run as root for uid (--user), flags before --,
// then argv.
func (h *runEnv) run(uid string, flags []string, argv ...string) hostResult {
	h.t.Helper()
	return h.runStdin(nil, uid, flags, argv...)
}

// runStdin is run with stdin as gensee's stdin (nil: /dev/null).
func (h *runEnv) runStdin(stdin *os.File, uid string, flags []string, argv ...string) hostResult {
	h.t.Helper()
	out, err := os.CreateTemp(h.dir, "stdout-")
	must(h.t, err)
	defer out.Close()
	mfile := filepath.Join(h.dir, fmt.Sprintf("manifest-%d.json", wsSeq.Add(1)))
	args := append([]string{"boundary", "run", "--config", h.cfgPath, "--manifest", mfile, "--user", uid}, flags...)
	args = append(append(args, "--"), argv...)
	cmd := exec.Command(filepath.Join(h.bin, "gensee"), args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = "/"
	err = cmd.Run()
	r := hostResult{code: cmd.ProcessState.ExitCode(), stderr: stderr.String(), mfile: mfile}
	if err != nil && cmd.ProcessState == nil {
		h.t.Fatal(err)
	}
	b, _ := os.ReadFile(out.Name())
	r.stdout = string(b)
	if b, err := os.ReadFile(mfile); err == nil {
		m, err := spec.ParseManifest(b)
		if err != nil {
			h.t.Fatalf("manifest %s does not parse: %v", mfile, err)
		}
		r.manifest = m
	}
	return r
}

// hostLeakCheck fails t if a gensee table, a host-run cgroup or a mount
// under dir is left.
func hostLeakCheck(t *testing.T, dir string) {
	if out, err := exec.Command("nft", "list", "tables").CombinedOutput(); err == nil && strings.Contains(string(out), "gensee_") {
		t.Errorf("leak: nftables tables left: %s", out)
	}
	for _, m := range []string{"/sys/fs/cgroup/unified/gensee", "/sys/fs/cgroup/gensee"} {
		ents, _ := os.ReadDir(m)
		for _, e := range ents {
			if e.IsDir() {
				t.Errorf("leak: cgroup %s/%s left", m, e.Name())
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), dir) {
		t.Errorf("leak: a mount under %s is left", dir)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "state", "hostruns")); len(ents) > 0 {
		t.Errorf("leak: %d host-run markers left", len(ents))
	}
}

func resultContract() spec.Contract {
	return spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}, Workspace: "/workspace",
		Products: []spec.Product{{Class: "structured_result", Slot: "out/result.json", MaxBytes: 65536, Modes: []string{"0644"}}}}
}

// runListener accepts on 127.0.0.1 and counts connections.
func runListener(t *testing.T) (int, *atomic.Int32) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, &n
}

// TestHostRunDenyAll: the command's very first instruction is a connect to
// a loopback server; deny_all holds and the server sees nothing.
func TestHostRunDenyAll(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	port, seen := runListener(t)
	ws := h.workspace(nil)
	r := h.run(hostNobody, []string{"--workspace", ws}, "timeout", "3", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port))
	if r.code == 0 {
		t.Fatalf("connect succeeded under deny_all: %s", r.stderr)
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the loopback server saw %d connections", n)
	}
	if r.manifest == nil || r.manifest.Observation.Counters.DeniedPackets == 0 {
		t.Fatalf("manifest counts no denied packet: %+v\n%s", r.manifest, r.stderr)
	}
	if r.manifest.Enforcement.Network.TableRemoved != "deleted" || r.manifest.Host == nil || r.manifest.Host.UID != 65534 {
		t.Fatalf("manifest: %+v", r.manifest)
	}
	// The table went before gensee exited; the process holding the
	// socket that deleted it (until the kernel freed the table) ends by
	// itself, soon after.
	for deadline := time.Now().Add(5 * time.Second); lingering(t) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes still hold the run's released sockets 5 s after it ended", lingering(t))
		}
	}
}

// lingering counts the processes started as inner.LingerArg.
func lingering(t *testing.T) int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), inner.LingerArg) {
			n++
		}
	}
	return n
}

// TestHostRunAllowExact: only the allowed tuple is reached.
func TestHostRunAllowExact(t *testing.T) {
	p1, seen1 := runListener(t)
	p2, seen2 := runListener(t)
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkAllowExact,
		Allow: []spec.AllowRule{{IP: "127.0.0.1", Proto: "tcp", Port: p1}}}})
	ws := h.workspace(nil)
	r := h.run(hostNobody, []string{"--workspace", ws}, "bash", "-c",
		fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo ok1; timeout 2 bash -c 'exec 4<>/dev/tcp/127.0.0.1/%d' && echo ok2; true", p1, p2))
	if r.code != 0 || !strings.Contains(r.stdout, "ok1") || strings.Contains(r.stdout, "ok2") {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if seen1.Load() != 1 || seen2.Load() != 0 {
		t.Fatalf("allowed server saw %d, denied server saw %d", seen1.Load(), seen2.Load())
	}
	if c := r.manifest.Observation.Counters; c.AllowedPackets == 0 || c.DeniedPackets == 0 {
		t.Fatalf("counters %+v", c)
	}
}

// TestHostRunDrainsLingering: a child forked into the background outlives
// the command; the exit drain kills it.
func TestHostRunDrainsLingering(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	ws := h.workspace(nil)
	r := h.run(hostNobody, []string{"--workspace", ws}, "sh", "-c", "sleep 3171 >/dev/null 2>&1 & echo started")
	if r.code != 0 || r.manifest == nil || r.manifest.Drained < 1 {
		t.Fatalf("exit %d, manifest %+v, stderr %s", r.code, r.manifest, r.stderr)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), "3171") && strings.HasPrefix(string(b), "sleep") {
			t.Fatalf("lingering child %s still alive", p)
		}
	}
}

// TestHostRunStagedWorkspace: the real workspace is never written; the
// product is listed with its sha256 and the staged copy matches; writes to
// the home directory and the host's /etc fail, /tmp and /var/tmp are
// private and discarded.
func TestHostRunStagedWorkspace(t *testing.T) {
	h := startRunEnv(t, resultContract())
	ws := h.workspace(map[string]string{"in.txt": "original\n"})
	home := filepath.Join(h.dir, "home")
	must(t, os.Mkdir(home, 0o777))
	must(t, os.Chmod(home, 0o777))
	marker := fmt.Sprintf("gensee-it-%d", time.Now().UnixNano())
	script := `mkdir -p out && printf '{"ok":true}\n' > out/result.json && echo changed > in.txt
echo x > "$HOME/escape" 2>/dev/null && echo home-writable
echo x > /etc/` + marker + ` 2>/dev/null && echo etc-writable
echo x > /var/tmp/` + marker + ` && echo x > /tmp/` + marker + ` && echo tmp-private
true`
	r := h.run(hostNobody, []string{"--workspace", ws, "--env", "HOME=" + home}, "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "writable") || !strings.Contains(r.stdout, "tmp-private") {
		t.Fatalf("stdout %q", r.stdout)
	}
	for _, p := range []string{filepath.Join(home, "escape"), "/etc/" + marker, "/var/tmp/" + marker, "/tmp/" + marker} {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written on the host", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "in.txt")); string(b) != "original\n" {
		t.Errorf("real workspace changed: in.txt = %q", b)
	}
	if _, err := os.Lstat(filepath.Join(ws, "out")); err == nil {
		t.Errorf("real workspace gained out/")
	}
	m := r.manifest
	sum := sha256.Sum256([]byte("{\"ok\":true}\n"))
	if m.Gate.Verdict != spec.VerdictPass || len(m.Products) != 1 || m.Products[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("gate %+v products %+v", m.Gate, m.Products)
	}
	staged, err := os.ReadFile(filepath.Join(h.state, "operations", m.OperationID, m.Products[0].Staged))
	if err != nil || sha256.Sum256(staged) != sum {
		t.Fatalf("staged copy %q: %v", staged, err)
	}
	// The staged workspace's overlay was volatile (its unmount syncs
	// nothing), and the manifest says the command's syncs reached no disk.
	if _, err := os.Stat(filepath.Join(h.state, "operations", m.OperationID, "work", "work", "incompat", "volatile")); err != nil {
		t.Errorf("the staged overlay was not mounted volatile: %v", err)
	}
	if m.Host == nil || len(m.Host.Writable) == 0 || !strings.Contains(m.Host.Writable[0], "volatile") {
		t.Errorf("writable does not say the staged overlay is volatile: %+v", m.Host)
	}
	rec, err := os.ReadFile(filepath.Join(h.state, "operations", m.OperationID, "manifest.json"))
	must(t, err)
	copied, _ := os.ReadFile(r.mfile)
	if !bytes.Equal(rec, copied) {
		t.Errorf("--manifest differs from the record")
	}
	out, err := exec.Command(filepath.Join(h.bin, "gensee"), "manifest", "verify", "--config", h.cfgPath, "--operation", m.OperationID).CombinedOutput()
	if err != nil {
		t.Errorf("manifest verify: %v: %s", err, out)
	}
}

// TestHostRunGateFails: invalid JSON in the structured_result slot fails
// the gate with exit status 123.
func TestHostRunGateFails(t *testing.T) {
	h := startRunEnv(t, resultContract())
	ws := h.workspace(nil)
	r := h.run(hostNobody, []string{"--workspace", ws}, "sh", "-c", "mkdir -p out && echo 'not json' > out/result.json")
	if r.code != 123 || r.manifest == nil || r.manifest.Gate.Verdict != spec.VerdictFail {
		t.Fatalf("exit %d (want 123), manifest %+v, stderr %s", r.code, r.manifest, r.stderr)
	}
}

// TestHostRunHostile: the command holds no capability (cannot touch the
// table), a setuid-root binary in the workspace stays unprivileged.
func TestHostRunHostile(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	ws := h.workspace(nil)
	id, err := os.ReadFile("/usr/bin/id")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(ws, "suid-id"), id, 0o755))
	must(t, os.Chmod(filepath.Join(ws, "suid-id"), 0o4755))
	r := h.run(hostNobody, []string{"--workspace", ws}, "sh", "-c",
		`nft flush ruleset 2>/dev/null && echo flushed; nft delete table inet gensee_x 2>/dev/null && echo deleted; ./suid-id -u; ./suid-id -ru; grep CapEff /proc/self/status`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "flushed") || strings.Contains(r.stdout, "deleted") {
		t.Fatalf("the command changed nftables: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "65534\n65534\n") || !strings.Contains(r.stdout, "CapEff:\t0000000000000000") {
		t.Fatalf("setuid binary or capabilities: %q", r.stdout)
	}
	if r.manifest.Enforcement.Network.TableRemoved != "deleted" {
		t.Fatalf("table %+v", r.manifest.Enforcement.Network)
	}
}

// TestHostRunRefusals: each bad input is refused (125) before the command
// starts, with the reason and the failing field, and leaves nothing.
func TestHostRunRefusals(t *testing.T) {
	h := startRunEnv(t, resultContract())
	ws := h.workspace(nil)
	link := filepath.Join(h.dir, "ws-link")
	must(t, os.Symlink(ws, link))
	file := filepath.Join(h.dir, "ws-file")
	must(t, os.WriteFile(file, nil, 0o644))
	wrongKey := filepath.Join(h.dir, "inference-wrong-key.json")
	must(t, os.WriteFile(wrongKey, []byte(h.inference(spec.Observation{Schema: spec.SchemaObservation, ExecutableSHA256: strings.Repeat("a", 64),
		CommandDigest: "sha256:" + strings.Repeat("b", 64)}, nil, newKey(t))), 0o644))
	otherObs := filepath.Join(h.dir, "observation-other.json")
	out, err := exec.Command(filepath.Join(h.bin, "gensee"), "observe", "--workspace", ws, "--user", hostNobody, "--", "sh", "-c", "other").Output()
	must(t, err)
	must(t, os.WriteFile(otherObs, out, 0o644))
	witness := filepath.Join(h.dir, "ran")
	cmd := []string{"sh", "-c", "touch " + witness}
	cases := []struct {
		name, uid string
		flags     []string
		argv      []string
		want      []string // in stderr
	}{
		{"no inference, no safe default", hostStrict, []string{"--workspace", ws}, cmd, []string{"no_inference", "--inference"}},
		{"bad signature", hostStrict, []string{"--workspace", ws, "--inference", wrongKey}, cmd, []string{"bad_signature", "--inference"}},
		{"observation mismatch", hostNobody, []string{"--workspace", ws, "--observation", otherObs}, cmd, []string{"preflight_mismatch", "--observation"}},
		{"workspace symlink", hostNobody, []string{"--workspace", link}, cmd, []string{"workspace", "symlink"}},
		{"workspace not a directory", hostNobody, []string{"--workspace", file}, cmd, []string{"workspace", "not a directory"}},
		{"workspace overlay cannot use", hostNobody, []string{"--workspace", "/proc/sys"}, cmd, []string{"workspace", "overlay"}},
		{"command not found", hostNobody, []string{"--workspace", ws}, []string{"no-such-command-gensee"}, []string{"command", "argv[0]"}},
		{"no command", hostNobody, []string{"--workspace", ws}, nil, []string{"no command"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := os.ReadDir(filepath.Join(h.state, "operations"))
			r := h.run(c.uid, c.flags, c.argv...)
			if r.code != 125 {
				t.Fatalf("exit %d, want 125: %s", r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q: %s", w, r.stderr)
				}
			}
			if _, err := os.Stat(witness); err == nil {
				t.Fatalf("the command ran")
			}
			if r.manifest != nil {
				t.Errorf("a manifest was written for a refused run")
			}
			after, _ := os.ReadDir(filepath.Join(h.state, "operations"))
			if len(after) != len(before) {
				t.Errorf("a refused run left an operation record")
			}
			hostLeakCheck(t, h.dir)
		})
	}
	b, err := os.ReadFile(filepath.Join(h.state, "refusals.jsonl"))
	if err != nil || bytes.Count(b, []byte("\n")) < len(cases)-1 {
		t.Errorf("refusals log: %v\n%s", err, b)
	}
	var last map[string]any
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil || last["runtime"] != "host" {
		t.Errorf("last refusal %s: %v", lines[len(lines)-1], err)
	}
}

// TestHostRunTerminalInput: what was typed on the caller's terminal
// reaches the command through gensee's relay, which reads it only once
// the command starts: a refused run leaves it on the terminal.
func TestHostRunTerminalInput(t *testing.T) {
	h := startRunEnv(t, resultContract())
	ws := h.workspace(nil)
	typeahead := func(line string) *os.File {
		master, slave := openPTY(t)
		s, err := os.OpenFile(slave, os.O_RDWR|syscall.O_NOCTTY, 0)
		must(t, err)
		t.Cleanup(func() { s.Close() })
		_, err = master.Write([]byte(line + "\n"))
		must(t, err)
		return s
	}
	// Refused (no inference, no safe default): the line stays typed.
	s := typeahead("typeahead-refused")
	r := h.runStdin(s, hostStrict, []string{"--workspace", ws}, "sh", "-c", "cat")
	if r.code != 125 {
		t.Fatalf("exit %d, want 125: %s", r.code, r.stderr)
	}
	fd := int(s.Fd()) // once: each Fd() puts the file back in blocking mode
	must(t, syscall.SetNonblock(fd, true))
	b := make([]byte, 256)
	n, _ := syscall.Read(fd, b)
	if got := string(b[:max(n, 0)]); got != "typeahead-refused\n" {
		t.Errorf("a refused run read the caller's terminal: left %q", got)
	}
	// Admitted: the command reads the line.
	s = typeahead("typeahead-run")
	r = h.runStdin(s, hostNobody, []string{"--workspace", ws}, "sh", "-c", `read x; echo "got=$x"; mkdir -p out; echo '{}' > out/result.json`)
	if r.code != 0 || !strings.Contains(r.stdout, "got=typeahead-run") {
		t.Fatalf("exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	hostLeakCheck(t, h.dir)
}

// TestHostRunRecordFailure: a run whose record cannot be completed (its
// index cannot be written) fails before the command starts and leaves
// nothing: no operation record (its reserve among it) that retention
// would keep as a running one, no cgroup, table or marker.
func TestHostRunRecordFailure(t *testing.T) {
	h := startRunEnv(t, resultContract())
	ws := h.workspace(nil)
	must(t, os.MkdirAll(filepath.Join(h.state, "index"), 0o700))
	blocker := filepath.Join(h.state, "index", "host")
	must(t, os.WriteFile(blocker, nil, 0o600))
	defer os.Remove(blocker)
	before, _ := os.ReadDir(filepath.Join(h.state, "operations"))
	witness := filepath.Join(h.dir, "ran-record")
	r := h.run(hostNobody, []string{"--workspace", ws}, "sh", "-c", "touch "+witness)
	if r.code == 0 || r.manifest != nil {
		t.Fatalf("exit %d, manifest %v: %s", r.code, r.manifest != nil, r.stderr)
	}
	if _, err := os.Stat(witness); err == nil {
		t.Fatal("the command ran")
	}
	if after, _ := os.ReadDir(filepath.Join(h.state, "operations")); len(after) != len(before) {
		t.Errorf("the failed run left an operation record (%d before, %d after)", len(before), len(after))
	}
	hostLeakCheck(t, h.dir)
}

// TestHostRunSudoEnvIgnored: the invoking user comes from the kernel.
// Root (this test) without --user is refused (exit 125, reason user)
// whatever SUDO_UID and SUDO_GID say, and nothing is left: no command ran,
// no manifest, no operation record.
func TestHostRunSudoEnvIgnored(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	ws := h.workspace(nil)
	witness := filepath.Join(h.dir, "ran")
	for _, sudoEnv := range [][]string{nil, {"SUDO_UID=0", "SUDO_GID=0"}, {"SUDO_UID=" + hostNobody, "SUDO_GID=" + hostNobody, "SUDO_USER=nobody"}} {
		mfile := filepath.Join(h.dir, "manifest-env.json")
		cmd := exec.Command(filepath.Join(h.bin, "gensee"), "boundary", "run", "--config", h.cfgPath, "--manifest", mfile,
			"--workspace", ws, "--", "sh", "-c", "touch "+witness)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, sudoEnv...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil {
			t.Fatal(err)
		}
		if code := cmd.ProcessState.ExitCode(); code != 125 || !strings.Contains(string(out), "admission refused: user: the invoking user is root") {
			t.Fatalf("env %q: exit %d, want 125 refused (user): %s", sudoEnv, code, out)
		}
		for _, p := range []string{witness, mfile} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("env %q: %s is left", sudoEnv, p)
			}
		}
		if ents, _ := os.ReadDir(filepath.Join(h.state, "operations")); len(ents) > 0 {
			t.Errorf("env %q: an operation record is left", sudoEnv)
		}
	}
}

// TestHostRunOrphans: a gensee killed mid-run leaves its command, cgroup
// and table; the next boundary run drains and removes them.
func TestHostRunOrphans(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}})
	ws := h.workspace(nil)
	cmd := exec.Command(filepath.Join(h.bin, "gensee"), "boundary", "run", "--config", h.cfgPath, "--user", hostNobody, "--workspace", ws, "--", "sleep", "3172")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	must(t, cmd.Start())
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := exec.Command("nft", "list", "tables").Output()
		if strings.Contains(string(out), "gensee_") {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the run's table never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // let the wrapper exec
	cmd.Process.Kill()
	cmd.Wait()
	r := h.run(hostNobody, []string{"--workspace", ws}, "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, _ := os.ReadFile(p); strings.HasPrefix(string(b), "sleep\x003172") {
			t.Fatalf("the orphaned command %s is still alive", p)
		}
	}
	// hostLeakCheck (cleanup) asserts no table, cgroup or marker is left.
}

// TestHostRunDeadline: the contract's deadline kills the command's cgroup;
// boundary run exits 124 and the manifest says the deadline was exceeded.
func TestHostRunDeadline(t *testing.T) {
	h := startRunEnv(t, spec.Contract{Network: spec.Network{Mode: spec.NetworkDenyAll}, Deadline: "1s"})
	ws := h.workspace(nil)
	start := time.Now()
	r := h.run(hostNobody, []string{"--workspace", ws}, "sleep", "60")
	if r.code != 124 || r.manifest == nil || !r.manifest.Deadlines.Exceeded || time.Since(start) > 20*time.Second {
		t.Fatalf("exit %d after %s, manifest %+v: %s", r.code, time.Since(start), r.manifest, r.stderr)
	}
}
