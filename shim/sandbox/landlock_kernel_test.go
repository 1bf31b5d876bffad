package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// landlockProbes act on what the parent made (env); creations go to fresh
// names so the control run and the sandboxed run do not collide.
func landlockProbes(env probeEnv) map[string]func() error {
	pid := strconv.Itoa(os.Getpid())
	create := func(path string) func() error {
		return func() error {
			fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}
	}
	open := func(path string, flags int) func() error {
		return func() error {
			fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}
	}
	tcp := func(port int, bind bool) func() error {
		return func() error {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			sa := &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
			if bind {
				return unix.Bind(fd, sa)
			}
			return unix.Connect(fd, sa)
		}
	}
	return map[string]func() error{
		"create_outside": create(filepath.Join(env.Outside, "new-"+pid)),
		"write_outside":  open(env.OutsideFile, unix.O_WRONLY),
		"truncate_outside": func() error {
			return unix.Truncate(env.OutsideFile, 0)
		},
		"read_outside":  open(env.OutsideFile, unix.O_RDONLY),
		"create_inside": create(filepath.Join(env.Inside, "new-"+pid)),
		"mkdir_inside": func() error {
			return unix.Mkdir(filepath.Join(env.Inside, "dir-"+pid), 0o700)
		},
		"rename_inside": func() error {
			from := filepath.Join(env.Inside, "from-"+pid)
			if err := create(from)(); err != nil {
				return err
			}
			if err := unix.Mkdir(filepath.Join(env.Inside, "to-"+pid), 0o700); err != nil {
				return err
			}
			return unix.Rename(from, filepath.Join(env.Inside, "to-"+pid, "f"))
		},
		"readdir_root": func() error {
			fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			var buf [4096]byte
			_, err = unix.Getdents(fd, buf[:])
			return err
		},
		"write_dev_null": open("/dev/null", unix.O_WRONLY),
		"ioctl_dev_null": func() error { return ioctlOn("/dev/null") },
		"ioctl_dev_zero": func() error { return ioctlOn("/dev/zero") },
		"connect_abstract": func() error {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + env.Abstract})
		},
		"signal_parent": func() error { return unix.Kill(env.Parent, 0) },
		"tcp_allowed":   tcp(env.AllowedPort, false),
		"tcp_denied":    tcp(env.DeniedPort, false),
		"tcp_bind":      tcp(0, true),
	}
}

// ioctlOn opens path read-only and asks it TCGETS: a device ioctl that
// /dev/null and /dev/zero answer ENOTTY to when Landlock lets it through.
func ioctlOn(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.IoctlGetTermios(fd, unix.TCGETS)
	return err
}

// TestLandlockKernel restricts a child and checks each access against a
// control child. Nothing here needs root: Landlock works unprivileged with
// no_new_privs.
func TestLandlockKernel(t *testing.T) {
	abi := LandlockABI()
	if abi < 6 {
		t.Skipf("Landlock ABI %d: this test checks scopes (ABI 6)", abi)
	}
	inside, outside := t.TempDir(), t.TempDir()
	outsideFile := filepath.Join(outside, "file")
	if err := os.WriteFile(outsideFile, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	abstract := "gensee-sandbox-test-" + strconv.Itoa(os.Getpid())
	unixL, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unixL.Close() })
	allowed, denied := listenTCP(t), listenTCP(t)

	env := probeEnv{Inside: inside, Outside: outside, OutsideFile: outsideFile, Abstract: abstract,
		AllowedPort: allowed, DeniedPort: denied, Parent: os.Getpid()}
	l := Landlock{
		ReadOnly:          []string{"/", "/nonexistent/gensee"},
		Writable:          []string{inside},
		WritableFiles:     []string{"/dev/null"},
		ConnectTCP:        []uint16{uint16(allowed)},
		NoBindTCP:         true,
		ScopeAbstractUnix: true,
		ScopeSignal:       true,
	}
	control := runProbes(t, childConfig{Probes: "landlock", Env: env}).Results
	if err := os.WriteFile(outsideFile, []byte("keep"), 0o600); err != nil { // the control truncated it
		t.Fatal(err)
	}
	out := runProbes(t, childConfig{Sandbox: "landlock", Landlock: l, Probes: "landlock", Env: env})
	check(t, out.Results, control, map[string]string{
		"create_outside":   "EACCES",
		"write_outside":    "EACCES",
		"truncate_outside": "EACCES",
		"read_outside":     "ok",
		"create_inside":    "ok",
		"mkdir_inside":     "ok",
		"rename_inside":    "ok",
		"readdir_root":     "ok",
		"write_dev_null":   "ok",
		"ioctl_dev_null":   "ENOTTY",
		"ioctl_dev_zero":   "EACCES",
		"connect_abstract": "EPERM",
		"signal_parent":    "EPERM",
		"tcp_allowed":      "ok",
		"tcp_denied":       "EACCES",
		"tcp_bind":         "EACCES",
	})
	if b, err := os.ReadFile(outsideFile); err != nil || string(b) != "keep" {
		t.Errorf("outside file after the sandboxed child: %q, %v", b, err)
	}

	a := out.Applied
	if a.ABI != abi || len(a.Missing) != 0 {
		t.Errorf("applied ABI %d missing %q, want ABI %d and nothing missing", a.ABI, a.Missing, abi)
	}
	for _, want := range []struct {
		got  []string
		name string
	}{{a.FS, "ioctl_dev"}, {a.FS, "truncate"}, {a.FS, "refer"}, {a.Net, "connect_tcp"}, {a.Net, "bind_tcp"},
		{a.Scoped, "abstract_unix_socket"}, {a.Scoped, "signal"}} {
		if !slices.Contains(want.got, want.name) {
			t.Errorf("applied %+v lacks %s", a, want.name)
		}
	}
	if !slices.Equal(a.Skipped, []string{"/nonexistent/gensee"}) {
		t.Errorf("skipped %q, want the missing read-only path", a.Skipped)
	}
}

// listenTCP listens on 127.0.0.1 until the test ends and returns the port.
func listenTCP(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// TestRestrictErrors: a Writable path must be an existing directory, a
// WritableFiles path must not be one. Restrict fails before
// landlock_restrict_self, so these run in the test process itself.
func TestRestrictErrors(t *testing.T) {
	if LandlockABI() == 0 {
		t.Skip("no Landlock on this kernel")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]Landlock{
		"writable missing":     {Writable: []string{filepath.Join(dir, "missing")}},
		"writable file":        {Writable: []string{file}},
		"writable file is dir": {WritableFiles: []string{dir}},
	} {
		if _, err := l.Restrict(); err == nil {
			t.Errorf("%s: Restrict succeeded", name)
		}
	}
}
