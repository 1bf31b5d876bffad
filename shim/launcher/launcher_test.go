package launcher

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types/runc/options"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/process"
	runcshim "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/runc"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
	runc "github.com/containerd/go-runc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/service"
)

// TestFrontMatchesContainerd pins what the front mirrors of containerd
// v2.4 to containerd's own definitions.
func TestFrontMatchesContainerd(t *testing.T) {
	if runcRoot != process.RuncRoot {
		t.Errorf("runcRoot %q, containerd's %q", runcRoot, process.RuncRoot)
	}
	if want := filepath.Join(defaults.DefaultStateDir, "s"); defaultSocketDir != want {
		t.Errorf("defaultSocketDir %q, containerd's %q", defaultSocketDir, want)
	}
	if want := string((&options.Options{}).ProtoReflect().Descriptor().FullName()); runcOptionsType != want {
		t.Errorf("runcOptionsType %q, containerd's %q", runcOptionsType, want)
	}
	if want := string((&runtimeoptions.Options{}).ProtoReflect().Descriptor().FullName()); runtimeOptionsType != want {
		t.Errorf("runtimeOptionsType %q, containerd's %q", runtimeOptionsType, want)
	}
	if envPreload != service.EnvPreload {
		t.Errorf("envPreload %q, the shim's %q", envPreload, service.EnvPreload)
	}
	if logLevelDebug != int32(bootapi.LogLevel_LOG_LEVEL_DEBUG) {
		t.Errorf("logLevelDebug %d, containerd's %d", logLevelDebug, bootapi.LogLevel_LOG_LEVEL_DEBUG)
	}
	for _, c := range [][4]string{
		{"/run/containerd/s", "/run/containerd/containerd.sock", "default", "c1"},
		{"/var/lib/x/s", "/var/lib/x/c.sock", "k8s.io", "0123abcd"},
	} {
		want, err := shim.CreateSocketAddress(namespaces.WithNamespace(context.Background(), c[2]), c[0], c[1], c[3], false)
		if err != nil {
			t.Fatal(err)
		}
		if got := socketAddress(c[0], c[1], c[2], c[3]); got != want {
			t.Errorf("socketAddress%v = %q, containerd's %q", c, got, want)
		}
	}
}

// TestDeleteResponseWire checks the DeleteResponse bytes against
// proto.Marshal's.
func TestDeleteResponseWire(t *testing.T) {
	for _, st := range []exitStatus{
		{Pid: 4242, Status: 3, Timestamp: time.Unix(1700000000, 5)},
		{Pid: 1, Status: 0, Timestamp: time.Unix(1700000000, 0)},
		{Pid: 77, Status: 137, Timestamp: time.Unix(-5, 999999999)},
		{},
	} {
		want, err := proto.Marshal(&taskapi.DeleteResponse{Pid: uint32(st.Pid), ExitStatus: uint32(st.Status), ExitedAt: timestamppb.New(st.Timestamp)})
		if err != nil {
			t.Fatal(err)
		}
		if got := deleteResponse(st); !bytes.Equal(got, want) {
			t.Errorf("%+v: %x, proto.Marshal %x", st, got, want)
		}
	}
}

// TestBootstrapWire checks the BootstrapParams decode and the
// BootstrapResult encoding against containerd's messages.
func TestBootstrapWire(t *testing.T) {
	dir := "/var/lib/x/s"
	params := func(cg string, level bootapi.LogLevel) []byte {
		p := &bootapi.BootstrapParams{InstanceID: "c1", Namespace: "demo", LogLevel: level, ContainerdVersion: "v2.4.2",
			ContainerdTtrpcAddress: "/x/c.sock.ttrpc", ContainerdGrpcAddress: "/x/c.sock", ContainerdBinary: "/bin/containerd", SocketDir: &dir}
		other, _ := anypb.New(&bootapi.BootstrapResult{Address: "x"})
		p.Extensions = append(p.Extensions, &bootapi.Extension{Value: other})
		if err := p.AddExtension(&options.Options{ShimCgroup: cg, Root: "/r", BinaryName: "runc"}); err != nil {
			t.Fatal(err)
		}
		if err := p.AddExtension(&options.Options{ShimCgroup: "/second"}); err != nil {
			t.Fatal(err)
		}
		if err := p.AddExtension(&runtimeoptions.Options{ConfigPath: "/etc/gensee/ci.toml"}); err != nil {
			t.Fatal(err)
		}
		if err := p.AddExtension(&runtimeoptions.Options{ConfigPath: "/second.toml"}); err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got, err := decodeBootstrapParams(params("/shim.slice", bootapi.LogLevel_LOG_LEVEL_TRACE))
	if err != nil {
		t.Fatal(err)
	}
	want := bootstrapParams{instanceID: "c1", namespace: "demo", logLevel: -8, grpcAddress: "/x/c.sock", socketDir: dir, runcOptions: true, shimCgroup: "/shim.slice",
		runtimeOptions: true, configPath: "/etc/gensee/ci.toml"}
	if got != want {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	if got, err = decodeBootstrapParams(params("", bootapi.LogLevel_LOG_LEVEL_INFO)); err != nil || got.shimCgroup != "" || !got.runcOptions || got.logLevel != 0 {
		t.Fatalf("decoded %+v (%v), want the first runc options' empty shim cgroup at info level", got, err)
	}
	full := params("", bootapi.LogLevel_LOG_LEVEL_INFO)
	for n := 1; n < len(full); n++ {
		if _, err := decodeBootstrapParams(full[:n]); err == nil {
			// A cut at a field boundary is a shorter message; any other
			// must be refused.
			var m bootapi.BootstrapParams
			if proto.Unmarshal(full[:n], &m) != nil {
				t.Fatalf("decoded a message proto.Unmarshal refuses (cut at %d)", n)
			}
		}
	}

	res := bootstrapResult("unix:///run/containerd/s/abc")
	wantRes, err := proto.Marshal(&bootapi.BootstrapResult{Version: 3, Address: "unix:///run/containerd/s/abc", Protocol: "ttrpc"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res, wantRes) {
		t.Fatalf("result %x, proto.Marshal %x", res, wantRes)
	}
}

// TestSpecGroup checks the shim group read from a spec's annotations.
func TestSpecGroup(t *testing.T) {
	dir := t.TempDir()
	for spec, want := range map[string]string{
		`{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.sandbox-id":"pod1"}}`:              "pod1",
		`{"annotations":{"io.kubernetes.cri.sandbox-id":"pod1","io.containerd.runc.v2.group":"g"}}`: "g",
		`{"process":{"args":["true"]}}`: "c1",
	} {
		p := filepath.Join(dir, "config.json")
		if err := os.WriteFile(p, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := specGroup(p, "c1"); err != nil || got != want {
			t.Errorf("%s: group %q (%v), want %q", spec, got, err, want)
		}
	}
	if _, err := specGroup(filepath.Join(dir, "none.json"), "c1"); err == nil {
		t.Error("a missing spec gave a group")
	}
}

// deleteBundle lays out what `shim delete` finds of a task its shim
// deleted: a bundle under a task dir with the runc options naming a runc
// root, the recorded exit and an operation marker whose operation is
// marked cleaned.
func deleteBundle(t *testing.T, id string) (bundle, root, opDir string) {
	t.Helper()
	tmp := t.TempDir()
	bundle, root = filepath.Join(tmp, "task", id), filepath.Join(tmp, "runc")
	state := filepath.Join(tmp, "state")
	opID := strings.Repeat("ab", 16)
	opDir = filepath.Join(state, "operations", opID)
	for _, d := range []string{bundle, opDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := runcshim.WriteOptions(bundle, &options.Options{Root: root}); err != nil {
		t.Fatal(err)
	}
	if err := runcshim.WriteExitStatus(bundle, runc.Exit{Pid: 4242, Status: 3, Timestamp: time.Unix(1700000000, 5).UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, record.BundleMarker), []byte(`{"operation_id":"`+opID+`","state_dir":"`+state+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(opDir, record.CleanedMarker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(bundle)
	return bundle, root, opDir
}

// TestCleanDelete checks that the front answers `delete` for a cleaned-up
// task with the exit runc.ReadExitStatus reads, and hands every other
// case to the full shim.
func TestCleanDelete(t *testing.T) {
	args := []string{"-namespace", "demo", "-address", "/x/c.sock", "-publish-binary", "/bin/containerd", "-id", "c1", "-bundle", "B", "delete"}
	bundle, root, opDir := deleteBundle(t, "c1")
	got, ok := cleanDelete(args)
	want, err := runcshim.ReadExitStatus(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || got != (exitStatus{Timestamp: want.Timestamp, Pid: want.Pid, Status: want.Status}) {
		t.Fatalf("cleanDelete %+v %v, want %+v", got, ok, want)
	}
	for name, c := range map[string]struct {
		args     []string
		setup    func()
		answered bool
	}{
		"start":          {args: append(args[:len(args)-1:len(args)-1], "start")},
		"debug":          {args: append([]string{"-debug"}, args...), answered: true}, // only logs more
		"unknown flag":   {args: append([]string{"-x"}, args...)},
		"no namespace":   {args: args[2:]},
		"bad namespace":  {args: append([]string{"-namespace", "../demo"}, args[2:]...)},
		"runc has state": {setup: func() { os.MkdirAll(filepath.Join(root, "demo", "c1"), 0o700) }},
		"not cleaned":    {setup: func() { os.Remove(filepath.Join(opDir, record.CleanedMarker)) }},
		"no exit":        {setup: func() { os.Remove(filepath.Join(bundle, "exit.json")) }},
		"invalid exit":   {setup: func() { os.WriteFile(filepath.Join(bundle, "exit.json"), []byte(`{"Pid":0}`), 0o600) }},
		"bad marker":     {setup: func() { os.WriteFile(filepath.Join(bundle, record.BundleMarker), []byte("{"), 0o600) }},
		"bad options":    {setup: func() { os.WriteFile(filepath.Join(bundle, "options.json"), []byte("{"), 0o600) }},
		"default runc root": {answered: true, setup: func() {
			os.Remove(filepath.Join(bundle, "options.json"))
			if _, err := os.Lstat(filepath.Join(runcRoot, "demo", "c1")); err == nil {
				t.Skip("a container demo/c1 exists under the default runc root")
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			bundle, root, opDir = deleteBundle(t, "c1")
			a := args
			if c.args != nil {
				a = c.args
			}
			if c.setup != nil {
				c.setup()
			}
			_, ok := cleanDelete(a)
			if ok != c.answered {
				t.Fatalf("answered %v, want %v", ok, c.answered)
			}
		})
	}
}

// TestFrontStaysSmall checks that the front links none of what makes the
// full shim slow to start.
func TestFrontStaysSmall(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/containerd-shim-gensee-v2").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"google.golang.org/", "github.com/containerd/", "github.com/sirupsen/", "go.opentelemetry.io/"} {
			if strings.HasPrefix(dep, heavy) {
				t.Errorf("the front links %s", dep)
			}
		}
	}
}

// TestRuncOptionsFields checks that runcOptions has every JSON field of
// containerd's options.Options with the same kind, so options.json is
// refused where runc.ReadOptions refuses it.
func TestRuncOptionsFields(t *testing.T) {
	fields := func(v any) map[string]reflect.Kind {
		m := map[string]reflect.Kind{}
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			f := rt.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" && f.IsExported() {
				m[name] = f.Type.Kind()
			}
		}
		return m
	}
	got, want := fields(runcOptions{}), fields(options.Options{})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("runcOptions fields %v, options.Options %v", got, want)
	}
	dir := t.TempDir()
	for _, doc := range []string{`{"root":"/r","io_uid":"x"}`, `{"root":7}`, `{`} {
		if err := os.WriteFile(filepath.Join(dir, "options.json"), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := runcshim.ReadOptions(dir); err == nil {
			t.Fatalf("runc.ReadOptions took %s", doc)
		}
		if runcStateGone(dir, "demo", "c1") {
			t.Errorf("runcStateGone took %s, which runc.ReadOptions refuses", doc)
		}
	}
}

// TestBootstrapRefusals checks that the decode refuses what protobuf or
// FindExtension would read otherwise, and reads log levels as int32.
func TestBootstrapRefusals(t *testing.T) {
	str := func(num int, s string) []byte { return appendBytesField(nil, num, s) }
	anyOf := func(url string, value []byte) []byte {
		return append(str(1, url), appendBytesField(nil, 2, string(value))...)
	}
	ext := func(anyMsg []byte) []byte {
		return appendBytesField(nil, 8, string(appendBytesField(nil, 1, string(anyMsg))))
	}
	runcURL := "type.googleapis.com/" + runcOptionsType
	base := append(str(1, "c1"), str(2, "demo")...)
	for name, msg := range map[string][]byte{
		"non-UTF-8 id":          append(str(1, "c\xff"), str(2, "demo")...),
		"non-UTF-8 type URL":    append(base, ext(anyOf("x\xff", nil))...),
		"non-UTF-8 runc root":   append(base, ext(anyOf(runcURL, str(7, "/r\xff")))...),
		"extension value twice": append(base, appendBytesField(nil, 8, string(append(appendBytesField(nil, 1, string(str(1, runcURL))), appendBytesField(nil, 1, string(appendBytesField(nil, 2, string(str(3, "/cg")))))...)))...),
		"bad extension later":   append(append(base, ext(anyOf(runcURL, nil))...), appendBytesField(nil, 8, "\xff")...),
		"truncated length":      append(base, 0x42, 0x05, 'a'),
		"unknown wire type":     append(base, 0x0b),
	} {
		var m bootapi.BootstrapParams
		if _, err := decodeBootstrapParams(msg); err == nil {
			t.Errorf("%s: decoded (proto.Unmarshal: %v)", name, proto.Unmarshal(msg, &m))
		}
	}
	for level, wantLevel := range map[bootapi.LogLevel]int32{bootapi.LogLevel_LOG_LEVEL_DEBUG: -4, -3: -3, bootapi.LogLevel_LOG_LEVEL_PANIC: 12} {
		b, err := proto.Marshal(&bootapi.BootstrapParams{InstanceID: "c1", Namespace: "demo", LogLevel: level})
		if err != nil {
			t.Fatal(err)
		}
		if p, err := decodeBootstrapParams(b); err != nil || p.logLevel != wantLevel {
			t.Errorf("level %d: decoded %d (%v)", level, p.logLevel, err)
		}
	}
}

// TestStartArgs checks which calls `start` may answer.
func TestStartArgs(t *testing.T) {
	base := []string{"-namespace", "demo", "-address", "/x/c.sock", "-publish-binary", "/bin/containerd", "-id", "c1", "start"}
	if ns, id, ok := startArgs(base); !ok || ns != "demo" || id != "c1" {
		t.Fatalf("startArgs(%q) = %q %q %v", base, ns, id, ok)
	}
	for _, args := range [][]string{
		append([]string{"-debug"}, base...),
		append([]string{"-socket", "/x"}, base...),
		append([]string{"-namespace", "a/../b"}, base[2:]...),
		append([]string{"-namespace", strings.Repeat("n", 77)}, base[2:]...),
		base[2:],
		append(base[:len(base)-1:len(base)-1], "delete"),
		{"-info"},
	} {
		if _, _, ok := startArgs(args); ok {
			t.Errorf("startArgs(%q) answers", args)
		}
	}
}

// TestStdinFile checks that the handed-on stdin reads back the bytes.
func TestStdinFile(t *testing.T) {
	in := bytes.Repeat([]byte("bootstrap"), 1000)
	f, err := stdinFile(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(in))
	}
}

// startFixture is a bundle for `start` and a stand-in full shim (this
// test binary, through a link named gensee-shim: TestMain) that notes its
// argv, comm, working directory, environment and fd 3, then waits to be
// killed (the OOM score is set on it after its start).
type startFixture struct {
	bundle, sockDir, full, notes string
	file                         *os.File // full, opened as Main opens it
}

// standInNotes, in the environment, makes this test binary the stand-in
// full shim, noting to the file it names.
const standInNotes = "GENSEE_TEST_STANDIN_NOTES"

func TestMain(m *testing.M) {
	if notes := os.Getenv(standInNotes); notes != "" {
		standIn(notes)
	}
	os.Exit(m.Run())
}

// standIn notes what `start` gave the long-lived shim, in one append (its
// last line, pgid, says the start is noted), and waits to be killed.
func standIn(notes string) {
	fd3, _ := os.Readlink("/proc/self/fd/3")
	comm, _ := os.ReadFile("/proc/self/comm")
	cwd, _ := os.Getwd()
	f, err := os.OpenFile(notes, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		os.Exit(1)
	}
	fmt.Fprintf(f, "pid %d\nargv0 %s\nargs %s\ncomm %s\ncwd %s\nenv %s %s\nfd3 %s\npgid %d\n", os.Getpid(), os.Args[0],
		strings.Join(os.Args[1:], " "), strings.TrimSpace(string(comm)), cwd, os.Getenv("GOMAXPROCS"), os.Getenv("OTEL_SERVICE_NAME"), fd3, syscall.Getpgrp())
	f.Close()
	time.Sleep(30 * time.Second)
	os.Exit(0)
}

func newStartFixture(t *testing.T, spec string) *startFixture {
	t.Helper()
	tmp := t.TempDir()
	fx := &startFixture{bundle: filepath.Join(tmp, "bundle"), sockDir: filepath.Join(tmp, "s"), full: filepath.Join(tmp, "gensee-shim"), notes: filepath.Join(tmp, "notes")}
	if err := os.MkdirAll(fx.bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fx.bundle, "config.json"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, fx.full); err != nil {
		t.Fatal(err)
	}
	if fx.file, err = os.Open(fx.full); err != nil {
		t.Fatal(err)
	}
	t.Setenv(standInNotes, fx.notes)
	t.Chdir(fx.bundle)
	t.Cleanup(func() {
		fx.file.Close()
		for _, l := range fx.lines(t, "pid ") {
			if pid, err := strconv.Atoi(l); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return fx
}

// lines are the notes' values for key, one per start of the stand-in.
func (fx *startFixture) lines(t *testing.T, key string) []string {
	b, _ := os.ReadFile(fx.notes)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			out = append(out, v)
		}
	}
	return out
}

func (fx *startFixture) params(t *testing.T, mut func(*bootapi.BootstrapParams)) []byte {
	t.Helper()
	p := &bootapi.BootstrapParams{InstanceID: "c1", Namespace: "demo", ContainerdGrpcAddress: "/x/c.sock", ContainerdTtrpcAddress: "/x/c.sock.ttrpc", SocketDir: &fx.sockDir}
	if err := p.AddExtension(&options.Options{BinaryName: "runc"}); err != nil {
		t.Fatal(err)
	}
	if mut != nil {
		mut(p)
	}
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitNotes waits, at most 10 s, for n starts of the stand-in to be noted.
// The stand-in is a real process (this test binary, started anew), which no
// synctest bubble holds: the wait is on the real clock, bounded by time
// rather than by a count of polls a loaded machine may stretch.
func (fx *startFixture) waitNotes(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(fx.lines(t, "pgid ")) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in full shim noted %d starts, want %d", len(fx.lines(t, "pgid ")), n)
		}
	}
}

// TestStartShim checks `start` against containerd's: the result and the
// socket address, the socket-dir link, the long-lived shim's argv,
// directory, environment, socket, process group and OOM score, a group's
// running shim reused, a stale socket replaced; and that each call the
// full shim must answer is handed on with nothing done.
func TestStartShim(t *testing.T) {
	fx := newStartFixture(t, `{"annotations":{"io.kubernetes.cri.sandbox-id":"pod1"}}`)
	res, ok, err := startShim("demo", "c1", fx.params(t, nil), fx.file)
	if err != nil || !ok {
		t.Fatalf("startShim: ok %v, %v", ok, err)
	}
	address, err := shim.CreateSocketAddress(namespaces.WithNamespace(context.Background(), "demo"), fx.sockDir, "/x/c.sock", "pod1", false)
	if err != nil {
		t.Fatal(err)
	}
	var r bootapi.BootstrapResult
	if err := proto.Unmarshal(res, &r); err != nil || r.Version != 3 || r.Protocol != "ttrpc" || r.Address != address {
		t.Fatalf("result %v (%v), want version 3, ttrpc, %s", &r, err, address)
	}
	if target, err := os.Readlink(filepath.Join(fx.bundle, "s")); err != nil || target != fx.sockDir {
		t.Fatalf("socket-dir link %q (%v), want %q", target, err, fx.sockDir)
	}
	st, err := os.Stat(socketPath(address))
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v (%v), want a 0600 socket", st, err)
	}
	fx.waitNotes(t, 1)
	if got := fx.lines(t, "args "); got[0] != "-namespace demo -id c1 -address /x/c.sock" {
		t.Errorf("args %q", got[0])
	}
	if got := fx.lines(t, "comm "); got[0] != "gensee-shim" {
		t.Errorf("comm %q, want gensee-shim (run from the opened file, named as the program)", got[0])
	}
	if got := fx.lines(t, "argv0 "); got[0] != fx.full {
		t.Errorf("argv[0] %q, want the full shim's path %q", got[0], fx.full)
	}
	if got := fx.lines(t, "cwd "); got[0] != fx.bundle {
		t.Errorf("cwd %q, want %q", got[0], fx.bundle)
	}
	if got := fx.lines(t, "env "); got[0] != strconv.Itoa(min(4, runtime.NumCPU()))+" containerd-shim-c1" {
		t.Errorf("env %q", got[0])
	}
	if got := fx.lines(t, "fd3 "); !strings.HasPrefix(got[0], "socket:") {
		t.Errorf("fd 3 is %q, want the shim socket", got[0])
	}
	pid := fx.lines(t, "pid ")[0]
	if got := fx.lines(t, "pgid "); got[0] != pid {
		t.Errorf("pgid %s, want its own group %s", got[0], pid)
	}
	parent, _ := os.ReadFile("/proc/self/oom_score_adj")
	child, _ := os.ReadFile("/proc/" + pid + "/oom_score_adj")
	if p, _ := strconv.Atoi(strings.TrimSpace(string(parent))); strings.TrimSpace(string(child)) != strconv.Itoa(min(p+1, 1000)) {
		t.Errorf("OOM score adjustment %q, want the parent's %q plus one", child, parent)
	}

	// The group's shim serves the socket: its address, nothing started.
	if _, err := net.Listen("unix", socketPath(address)); err == nil {
		t.Fatal("the socket was free")
	}
	os.Remove(socketPath(address))
	l, err := net.Listen("unix", socketPath(address))
	if err != nil {
		t.Fatal(err)
	}
	if res, ok, err = startShim("demo", "c1", fx.params(t, nil), fx.file); err != nil || !ok || !bytes.Equal(res, bootstrapResult(address)) {
		t.Fatalf("a running group shim: ok %v, %v", ok, err)
	}
	// A fixed window: it waits for a start not to happen, so load can make
	// it miss a late one, never fail a reuse.
	time.Sleep(100 * time.Millisecond)
	if n := len(fx.lines(t, "pid ")); n != 1 {
		t.Fatalf("%d shims started, want the running one reused", n)
	}
	// A stale socket (nothing accepts) is replaced.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, ok, err = startShim("demo", "c1", fx.params(t, nil), fx.file); err != nil || !ok {
		t.Fatalf("a stale socket: ok %v, %v", ok, err)
	}
	fx.waitNotes(t, 2)

	// Handed on, nothing done.
	for name, c := range map[string]struct {
		id, env string
		mut     func(*bootapi.BootstrapParams)
	}{
		"debug": {mut: func(p *bootapi.BootstrapParams) { p.LogLevel = bootapi.LogLevel_LOG_LEVEL_DEBUG }},
		"shim cgroup": {mut: func(p *bootapi.BootstrapParams) {
			p.Extensions = nil
			p.AddExtension(&options.Options{ShimCgroup: "/shim"})
		}},
		"other id":   {id: "c2"},
		"sched core": {env: "1"},
	} {
		t.Run(name, func(t *testing.T) {
			fx := newStartFixture(t, `{}`)
			if c.env != "" {
				t.Setenv("SCHED_CORE", c.env)
			}
			id := "c1"
			if c.id != "" {
				id = c.id
			}
			if _, ok, err := startShim("demo", id, fx.params(t, c.mut), fx.file); ok || err != nil {
				t.Fatalf("answered (ok %v, %v), want it handed to the full shim", ok, err)
			}
			if _, err := os.Lstat(filepath.Join(fx.bundle, "s")); err == nil {
				t.Error("the socket-dir link was written")
			}
			if ents, _ := os.ReadDir(fx.sockDir); len(ents) > 0 {
				t.Error("a socket was made")
			}
			if _, err := os.Stat(fx.notes); err == nil {
				t.Error("a shim was started")
			}
		})
	}
}

// TestCleanDeleteMatchesFullShim checks the front's delete answer against
// the full shim's Manager.Stop on the same bundle, with and without an
// operation marker.
func TestCleanDeleteMatchesFullShim(t *testing.T) {
	ctx := namespaces.WithNamespace(context.Background(), "demo")
	args := []string{"-namespace", "demo", "-id", "c1", "delete"}
	for _, marker := range []bool{true, false} {
		bundle, _, _ := deleteBundle(t, "c1")
		if !marker {
			os.Remove(filepath.Join(bundle, record.BundleMarker))
		}
		got, ok := cleanDelete(args)
		if !ok {
			t.Fatalf("marker %v: not answered", marker)
		}
		want, err := service.NewManager(service.RuntimeName).Stop(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if want != (shim.StopStatus{Pid: got.Pid, ExitStatus: got.Status, ExitedAt: got.Timestamp}) {
			t.Fatalf("marker %v: front %+v, full shim %+v", marker, got, want)
		}
	}
	// A marker naming a malformed operation: the full shim's.
	bundle, _, _ := deleteBundle(t, "c1")
	os.WriteFile(filepath.Join(bundle, record.BundleMarker), []byte(`{"operation_id":"../x","state_dir":"/tmp"}`), 0o600)
	if _, ok := cleanDelete(args); ok {
		t.Fatal("answered for a marker naming a malformed operation id")
	}
	// "root": "" is the default root, as for runc.ReadOptions.
	bundle, _, _ = deleteBundle(t, "c1")
	os.WriteFile(filepath.Join(bundle, "options.json"), []byte(`{"root":""}`), 0o600)
	if _, err := os.Lstat(filepath.Join(runcRoot, "demo", "c1")); err == nil {
		t.Skip("a container demo/c1 exists under the default runc root")
	}
	if _, ok := cleanDelete(args); !ok {
		t.Fatal("not answered with the default runc root")
	}
}
