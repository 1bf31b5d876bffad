package launcher

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/moby/sys/userns"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
)

// What `start` mirrors of containerd v2.4 (pkg/shim and the runc
// manager's Start); TestFrontMatchesContainerd pins each against it.
const (
	// defaultSocketDir is containerd's socket directory under its default
	// state directory (defaults.DefaultStateDir + "/s").
	defaultSocketDir = "/run/containerd/s"
	// socketDirLink is the link in the bundle to a socket directory
	// containerd named.
	socketDirLink = "s"
	// runcOptionsType is the runc options' protobuf full name: the
	// extension the runc manager's Start reads its shim cgroup from.
	runcOptionsType = "containerd.runc.v1.Options"
	// runtimeOptionsType is CRI's runtime options' protobuf full name
	// (ctr --runtime-config-path sends them too): config_path, field 2,
	// names the operator config the task's Create will load.
	runtimeOptionsType = "runtimeoptions.v1.Options"
	// logLevelDebug is bootapi.LogLevel_LOG_LEVEL_DEBUG.
	logLevelDebug = -4
	// maxBootstrapBytes bounds the bootstrap parameters read from stdin.
	maxBootstrapBytes = 10 << 20
)

// envPreload is the environment variable the front sets for the
// long-lived shim it starts (service.EnvPreload, which the tests pin): the
// config path containerd's start call named in its runtime options, ""
// for none.
const envPreload = "GENSEE_PRELOAD_CONFIG"

// groupLabels are the runc manager's: a container whose spec carries one
// joins the shim of that group (a CRI pod's sandbox).
var groupLabels = []string{"io.containerd.runc.v2.group", "io.kubernetes.cri.sandbox-id"}

// bootstrapParams is what `start` uses of containerd's BootstrapParams.
type bootstrapParams struct {
	instanceID, namespace string
	logLevel              int32
	grpcAddress           string
	socketDir             string
	// shimCgroup is the first runc options extension's shim_cgroup;
	// runcOptions says there was one.
	runcOptions bool
	shimCgroup  string
	// configPath is the first runtime options extension's config_path:
	// the config the task's Create names ("": the shim's default).
	configPath     string
	runtimeOptions bool
}

// startArgs reports whether args are containerd's `start` call with no
// flag the runc manager's Start would act on beyond the namespace, id and
// addresses, and the namespace and id.
func startArgs(args []string) (ns, id string, ok bool) {
	f, ok := parseShimFlags(args)
	if !ok || f.action != "start" || f.debug || f.socket != "" || f.debugSocket != "" || !record.ValidName(f.ns) || f.id == "" {
		return "", "", false
	}
	return f.ns, f.id, true
}

// startShim runs `start` for bootstrap parameters in, as containerd's shim
// and the runc manager's Start would, with the full shim full (opened and
// checked: fsafe.OpenTrusted) as the long-lived shim, run from that file
// (fsafe.ExecLink: its comm its own name, its argv[0] its path): it
// returns the BootstrapResult to print. ok is false
// when the call is one the full shim must answer (its debug socket, a
// shim cgroup, parameters it would refuse); nothing was done then.
func startShim(ns, id string, in []byte, full *os.File) (result []byte, ok bool, err error) {
	p, err := decodeBootstrapParams(in)
	if err != nil || p.instanceID != id || p.namespace != ns || p.logLevel <= logLevelDebug ||
		p.shimCgroup != "" || os.Getenv("SCHED_CORE") != "" {
		return nil, false, nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, false, nil
	}
	grouping, err := specGroup(filepath.Join(cwd, "config.json"), id)
	if err != nil {
		return nil, false, nil
	}
	if p.socketDir != "" {
		if err := writeSocketDir(p.socketDir); err != nil {
			return nil, true, fmt.Errorf("failed to write socket-dir: %w", err)
		}
	}
	dir := p.socketDir
	if dir == "" {
		dir = defaultSocketDir
	}
	address := socketAddress(dir, p.grpcAddress, ns, grouping)
	l, err := shimSocket(address)
	if errors.Is(err, errShimRunning) {
		return bootstrapResult(address), true, nil
	}
	if err != nil {
		return nil, true, err
	}
	// The long-lived shim serves the socket from here on: closing the
	// listener must not remove it.
	l.SetUnlinkOnClose(false)
	f, err := l.File()
	l.Close()
	if err != nil {
		os.Remove(socketPath(address))
		return nil, true, err
	}
	defer f.Close()
	link, remove := fsafe.ExecLink(full, filepath.Base(full.Name()))
	defer remove()
	// The runc manager's newCommand, with the full shim as the program
	// (argv[0] its path, as when the full shim's own start spawns it).
	cmd := exec.Command(full.Name(), "-namespace", ns, "-id", id, "-address", p.grpcAddress)
	cmd.Path = link
	cmd.Dir = cwd
	// containerd's runc manager sets GOMAXPROCS=4; fewer where the shim
	// may run on fewer CPUs: each P it cannot use keeps its own caches,
	// resident in every sleeping task's shim.
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(shimProcs()), "OTEL_SERVICE_NAME=containerd-shim-"+id,
		// The config the first Create will name: the shim loads it and
		// its catalog while containerd connects (service.EnvPreload).
		envPreload+"="+p.configPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		os.Remove(socketPath(address))
		return nil, true, err
	}
	if err := adjustOOMScore(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		os.Remove(socketPath(address))
		return nil, true, fmt.Errorf("failed to adjust OOM score for shim: %w", err)
	}
	return bootstrapResult(address), true, nil
}

// shimProcs is the long-lived shim's GOMAXPROCS: containerd's 4, or the
// CPUs this process may run on when fewer.
func shimProcs() int { return min(4, runtime.NumCPU()) }

// decodeBootstrapParams decodes the protobuf BootstrapParams fields start
// uses and skips the rest; a malformed message is an error.
// Whatever proto.Unmarshal (and the runc manager's FindExtension) would
// refuse or read otherwise is an error too: a string field that is not
// UTF-8, an extension that does not parse, an Extension whose value is
// given twice (protobuf merges the two).
func decodeBootstrapParams(b []byte) (bootstrapParams, error) {
	var p bootstrapParams
	err := walkFields(b, func(num int, typ int, v uint64, data []byte) error {
		if typ == wireBytes && num != 8 && !utf8.Valid(data) { // every other bytes field is a string
			return fmt.Errorf("field %d is not UTF-8", num)
		}
		switch {
		case num == 1 && typ == wireBytes:
			p.instanceID = string(data)
		case num == 2 && typ == wireBytes:
			p.namespace = string(data)
		case num == 3 && typ == wireVarint:
			p.logLevel = int32(v)
		case num == 6 && typ == wireBytes:
			p.grpcAddress = string(data)
		case num == 9 && typ == wireBytes:
			p.socketDir = string(data)
		case num == 8 && typ == wireBytes:
			return p.extension(data)
		}
		return nil
	})
	return p, err
}

// extension reads an Extension (field 1: a google.protobuf.Any, whose
// type_url is field 1 and value field 2): the first runc options one
// gives the shim cgroup (runc Options field 3), as FindExtension reads it.
func (p *bootstrapParams) extension(b []byte) error {
	var url string
	var value, anyMsg []byte
	values := 0
	if err := walkFields(b, func(num, typ int, _ uint64, data []byte) error {
		if num == 1 && typ == wireBytes {
			anyMsg = data
			values++
		}
		return nil
	}); err != nil {
		return err
	}
	if values > 1 {
		return errors.New("an extension's value is given twice")
	}
	if err := walkFields(anyMsg, func(num, typ int, _ uint64, data []byte) error {
		switch {
		case num == 1 && typ == wireBytes:
			if !utf8.Valid(data) {
				return errors.New("an extension's type URL is not UTF-8")
			}
			url = string(data)
		case num == 2 && typ == wireBytes:
			value = data
		}
		return nil
	}); err != nil {
		return err
	}
	// anypb's MessageIs: the full name after the type URL's last '/'.
	switch name := url[strings.LastIndexByte(url, '/')+1:]; {
	case name == runtimeOptionsType && !p.runtimeOptions:
		p.runtimeOptions = true
		return walkFields(value, func(num, typ int, _ uint64, data []byte) error {
			if num == 2 && typ == wireBytes && utf8.Valid(data) {
				p.configPath = string(data)
			}
			return nil
		})
	case p.runcOptions || name != runcOptionsType:
		return nil
	}
	p.runcOptions = true
	return walkFields(value, func(num, typ int, _ uint64, data []byte) error {
		if typ != wireBytes {
			return nil
		}
		switch num {
		case 3, 6, 7, 10, 11, 12: // runc Options' string fields
			if !utf8.Valid(data) {
				return fmt.Errorf("runc options field %d is not UTF-8", num)
			}
		}
		if num == 3 {
			p.shimCgroup = string(data)
		}
		return nil
	})
}

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// walkFields calls fn for each field of the protobuf message b, in order:
// its number, wire type, varint value (wireVarint) and bytes (wireBytes).
func walkFields(b []byte, fn func(num, typ int, v uint64, data []byte) error) error {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 || tag>>3 == 0 || tag>>3 > 1<<29-1 {
			return errors.New("malformed protobuf tag")
		}
		b = b[n:]
		num, typ := int(tag>>3), int(tag&7)
		var v uint64
		var data []byte
		switch typ {
		case wireVarint:
			if v, n = binary.Uvarint(b); n <= 0 {
				return errors.New("malformed protobuf varint")
			}
			b = b[n:]
		case wireBytes:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errors.New("malformed protobuf length")
			}
			data, b = b[n:n+int(l)], b[n+int(l):]
		case wireFixed64:
			if len(b) < 8 {
				return errors.New("short protobuf fixed64")
			}
			b = b[8:]
		case wireFixed32:
			if len(b) < 4 {
				return errors.New("short protobuf fixed32")
			}
			b = b[4:]
		default:
			return fmt.Errorf("protobuf wire type %d", typ)
		}
		if err := fn(num, typ, v, data); err != nil {
			return err
		}
	}
	return nil
}

// bootstrapResult is the BootstrapResult the runc manager's Start returns:
// version 3 (field 1), address (2), protocol "ttrpc" (3).
func bootstrapResult(address string) []byte {
	b := appendVarintField(nil, 1, 3)
	b = appendBytesField(b, 2, address)
	return appendBytesField(b, 3, "ttrpc")
}

// appendBytesField appends field num as a protobuf string.
func appendBytesField(b []byte, num int, s string) []byte {
	b = binary.AppendUvarint(b, uint64(num)<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// specGroup is the shim group of the container whose OCI spec is at path:
// its first group label's value, else id.
func specGroup(path, id string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var s struct {
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&s); err != nil {
		return "", err
	}
	for _, l := range groupLabels {
		if g, ok := s.Annotations[l]; ok {
			return g, nil
		}
	}
	return id, nil
}

// writeSocketDir links the bundle (the working directory) to dir, as
// containerd's shim does for the long-lived shim's cleanup.
func writeSocketDir(dir string) error {
	if _, err := os.Lstat(socketDirLink); err == nil {
		if err := os.Remove(socketDirLink); err != nil {
			return fmt.Errorf("remove existing socket dir link: %w", err)
		}
	}
	return os.Symlink(dir, socketDirLink)
}

// socketAddress is containerd's shim socket address (CreateSocketAddress)
// for group under dir, for the daemon at grpcAddress and namespace ns.
func socketAddress(dir, grpcAddress, ns, group string) string {
	d := sha256.Sum256([]byte(filepath.Join(grpcAddress, ns, group)))
	return "unix://" + dir + "/" + hex.EncodeToString(d[:])
}

// socketPath is the filesystem path of a unix:// address.
func socketPath(address string) string { return strings.TrimPrefix(address, "unix://") }

// errShimRunning says a shim of the group already serves the socket.
var errShimRunning = errors.New("shim socket in use")

// shimSocket listens on address as the runc manager's newShimSocket does:
// a socket already in use is the group's running shim (errShimRunning) if
// it accepts a connection, else stale and replaced.
func shimSocket(address string) (*net.UnixListener, error) {
	l, err := listenShimSocket(address)
	if err == nil {
		return l, nil
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "listen" || !errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("create new shim socket: %w", err)
	}
	if c, err := net.DialTimeout("unix", socketPath(address), 100*time.Millisecond); err == nil {
		c.Close()
		return nil, errShimRunning
	}
	if err := os.Remove(socketPath(address)); err != nil {
		return nil, fmt.Errorf("remove pre-existing socket: %w", err)
	}
	if l, err = listenShimSocket(address); err != nil {
		return nil, fmt.Errorf("try create new shim socket 2x: %w", err)
	}
	return l, nil
}

// listenShimSocket is containerd's shim.NewSocket for a unix:// address.
func listenShimSocket(address string) (*net.UnixListener, error) {
	path := socketPath(address)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("mkdir failed for %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		os.Remove(path)
		l.Close()
		return nil, fmt.Errorf("chmod failed for %s: %w", path, err)
	}
	return l.(*net.UnixListener), nil
}

// adjustOOMScore gives the shim pid its parent's (containerd's) OOM score
// adjustment plus one, as containerd's shim.AdjustOOMScore does.
func adjustOOMScore(pid int) error {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", os.Getppid()))
	if err != nil {
		return fmt.Errorf("get parent OOM score: %w", err)
	}
	score, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("get parent OOM score: %w", err)
	}
	score = min(max(score+1, -1000), 1000)
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("set shim OOM score: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(strconv.Itoa(score)); err != nil {
		if os.IsPermission(err) && (unix.Geteuid() != 0 || userns.RunningInUserNS()) {
			return nil
		}
		return fmt.Errorf("set shim OOM score: %w", err)
	}
	return nil
}

// readBootstrap reads the bootstrap parameters from r, as containerd's
// shim does (at most maxBootstrapBytes).
func readBootstrap(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, maxBootstrapBytes))
}
